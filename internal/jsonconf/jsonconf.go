package jsonconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"
)

// Error is a configuration error at one key path ("" is the top level).
type Error struct {
	// Path is the dotted key path of the offending value, such as
	// "events.replayClient.timeout" or "index.tierWeights.gpu"; list
	// elements appear as "[3]".
	Path string
	// Msg says what is wrong with it.
	Msg string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

var durationType = reflect.TypeFor[time.Duration]()

// MaxBytes bounds the input Decode reads; configurations are small, and a
// larger input is an error rather than a memory spike.
const MaxBytes = 16 << 20

// Decode reads one JSON value from r into *v by the package rules; anything
// but white space after the value is an error. Load, every package's
// LoadConfig, decodes with it.
func Decode[T any](r io.Reader, v *T) error {
	data, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return err
	}
	if len(data) > MaxBytes {
		return &Error{Msg: fmt.Sprintf("configuration larger than %d bytes", MaxBytes)}
	}
	return Unmarshal(data, v)
}

// Load is every package's LoadConfig: it decodes one JSON value from r
// over start (the zero value, or DefaultConfig where absent keys keep the
// defaults) by the package rules, then checks the result with check (nil:
// none), so that a configuration read from a file is validated where it is
// read, not first where it is used. A decoding error is returned through
// wrap, which gives it the package's name or sentinel error; check's error
// is returned as it is, since each package's Validate already names itself.
func Load[T any](r io.Reader, start T, wrap func(error) error, check func(T) error) (T, error) {
	var zero T
	if err := Decode(r, &start); err != nil {
		return zero, wrap(err)
	}
	if check != nil {
		if err := check(start); err != nil {
			return zero, err
		}
	}
	return start, nil
}

// Under is Load's wrap for a package with a sentinel error: the decoding
// error follows the sentinel, and errors.Is finds both.
func Under(sentinel error) func(error) error {
	return func(err error) error { return fmt.Errorf("%w: %w", sentinel, err) }
}

// Prefixed is Load's wrap for a package without one: the decoding error
// after the prefix ("lora: config").
func Prefixed(prefix string) func(error) error {
	return func(err error) error { return fmt.Errorf("%s: %w", prefix, err) }
}

// Unmarshal decodes data into *v by the package rules. It is what every
// Config's UnmarshalJSON calls (with the Config converted to a method-less
// type of the same fields, so that it does not recurse), so that a Config
// decodes strictly wherever it is decoded: alone, inside a larger document,
// or through sigs.k8s.io/yaml.
func Unmarshal[T any](data []byte, v *T) error {
	if v == nil {
		return fmt.Errorf("jsonconf: Unmarshal needs a non-nil %T", v)
	}
	rv := reflect.ValueOf(v)
	tree, err := parse(data)
	if err != nil {
		return err
	}
	conv, err := walk(tree, rv.Type().Elem(), "", true)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(conv)
	if err != nil {
		return fmt.Errorf("jsonconf: re-encode: %w", err)
	}
	detach(rv.Elem())
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &Error{Path: te.Field, Msg: fmt.Sprintf("cannot hold %s %s", te.Value, te.Type)}
		}
		return err
	}
	return nil
}

// Check reports whether data would decode into a value of type t by the
// package rules, without decoding it. Types whose UnmarshalJSON splits its
// input between parts use it to check the whole first, so that errors name
// full paths.
func Check(data []byte, t reflect.Type) error {
	tree, err := parse(data)
	if err != nil {
		return err
	}
	_, err = walk(tree, t, "", false)
	return err
}
