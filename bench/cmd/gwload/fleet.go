package main

import (
	"errors"
	"io"
)

func runFleet(o options, stdout io.Writer) error { return errors.New("not yet") }

func runPool(raw []byte) error { return errors.New("not yet") }
