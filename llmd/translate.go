package llmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/jsonconf"
)

// Translate reads a kvroute configuration document (JSON; kvroute's keys,
// as kvroute.LoadConfig reads them) that may also carry, at its top level,
// the parameters blocks of the llm-d router's precise-prefix-cache-producer,
// prefix-cache-affinity-filter and token-load-scorer plugins under those
// plugin type names, and returns the kvroute.Config they make together:
// kvroute.DefaultConfig's values for absent keys, each llm-d setting
// translated onto its kvroute key (see the package doc), the result
// validated.
//
// The rules are kvroute.LoadConfig's, in both parts: an unknown key — in
// kvroute's sections or in an llm-d block (llm-d settings kvroute has no
// equivalent for) — is an error naming its path, durations are Go duration
// strings, and a key given twice is an error. A setting given both by an
// llm-d key and by its kvroute key is an error naming both paths, even
// with equal values. Every error wraps kvroute.ErrInvalidConfig. A document
// without llm-d blocks yields exactly what kvroute.LoadConfig does.
func Translate(r io.Reader) (kvroute.Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, jsonconf.MaxBytes+1))
	if err != nil {
		return kvroute.Config{}, invalid(err)
	}
	if len(data) > jsonconf.MaxBytes {
		return kvroute.Config{}, invalid(&jsonconf.Error{Msg: fmt.Sprintf("configuration larger than %d bytes", jsonconf.MaxBytes)})
	}
	// The whole document first, so that its first error is the one
	// reported, in document order, whichever part it is in.
	if err := jsonconf.Check(data, documentType); err != nil {
		return kvroute.Config{}, invalid(err)
	}
	blocks, rest, err := split(data)
	if err != nil {
		return kvroute.Config{}, invalid(err)
	}
	cfg := kvroute.DefaultConfig()
	if err := jsonconf.Unmarshal(rest, &cfg); err != nil {
		return kvroute.Config{}, invalid(err)
	}
	if blocks != nil {
		var ps plugins
		if err := jsonconf.Unmarshal(blocks, &ps); err != nil {
			return kvroute.Config{}, invalid(err)
		}
		var top map[string]any
		if err := json.Unmarshal(rest, &top); err != nil {
			return kvroute.Config{}, invalid(err)
		}
		if err := ps.apply(&cfg, top); err != nil {
			return kvroute.Config{}, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return kvroute.Config{}, err
	}
	return cfg, nil
}

// invalid wraps err in kvroute.ErrInvalidConfig unless it already is one.
func invalid(err error) error {
	if errors.Is(err, kvroute.ErrInvalidConfig) {
		return err
	}
	return fmt.Errorf("%w: %w", kvroute.ErrInvalidConfig, err)
}

// documentType is the shape of a document Translate reads: kvroute.Config's
// fields and the plugin blocks side by side, for jsonconf.Check.
var documentType = func() reflect.Type {
	var fields []reflect.StructField
	for _, t := range []reflect.Type{reflect.TypeFor[kvroute.Config](), reflect.TypeFor[plugins]()} {
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				fields = append(fields, reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag})
			}
		}
	}
	return reflect.StructOf(fields)
}()

// split takes the plugin blocks out of a document that jsonconf.Check
// accepted: it returns them as one JSON object (nil when there are none)
// and the rest, kvroute's part, with its members in their order. A
// document that is not an object (null) is all rest.
func split(data []byte) (blocks, rest []byte, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, data, nil
	}
	var b, r bytes.Buffer
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		key, _ := tok.(string) // an object's member starts with its key
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		out := &r
		if key == pp || key == af || key == tl {
			out = &b
		}
		if out.Len() > 0 {
			out.WriteByte(',')
		} else {
			out.WriteByte('{')
		}
		k, _ := json.Marshal(key) // a string always encodes
		out.Write(k)
		out.WriteByte(':')
		out.Write(v)
	}
	for _, out := range []*bytes.Buffer{&b, &r} {
		if out.Len() == 0 {
			out.WriteByte('{')
		}
		out.WriteByte('}')
	}
	if b.Len() == 2 {
		return nil, r.Bytes(), nil
	}
	return b.Bytes(), r.Bytes(), nil
}
