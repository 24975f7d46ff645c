package jsonconf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// object is a parsed JSON object that keeps its key order.
type object struct {
	keys []string
	vals map[string]any
}

// MarshalJSON writes the object with its keys in their original order.
func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// parse reads one JSON value into *object, []any, json.Number, string, bool
// or nil, rejecting duplicate keys and trailing data.
func parse(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, "")
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Msg: "trailing data after the configuration value"}
	}
	return v, nil
}

func parseValue(dec *json.Decoder, path string) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, &Error{Path: path, Msg: "invalid JSON: " + err.Error()}
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, &Error{Path: path, Msg: "invalid JSON: " + err.Error()}
				}
				k := kt.(string)
				kp := join(path, k)
				if _, dup := o.vals[k]; dup {
					return nil, &Error{Path: kp, Msg: "key given twice"}
				}
				v, err := parseValue(dec, kp)
				if err != nil {
					return nil, err
				}
				o.keys = append(o.keys, k)
				o.vals[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, &Error{Path: path, Msg: "invalid JSON: " + err.Error()}
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := parseValue(dec, fmt.Sprintf("%s[%d]", path, len(a)))
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, &Error{Path: path, Msg: "invalid JSON: " + err.Error()}
			}
			return a, nil
		}
		return nil, &Error{Path: path, Msg: fmt.Sprintf("invalid JSON: unexpected %v", t)}
	default:
		return tok, nil
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
