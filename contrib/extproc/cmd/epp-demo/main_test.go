package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

func TestDemoBurstStaysOnOneEngine(t *testing.T) {
	defer leakcheck.Check(t)()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, 5), out.String())
	require.Contains(t, out.String(), "5 of 5 requests on")
}
