package jsonscan

import "math"

// maxMembersDepth is the nesting Members accepts inside an object, the
// bound encoding/json itself applies, so that Members refuses no body
// encoding/json would have read.
const maxMembersDepth = 10000

// Members reads buf, one JSON object with optional whitespace around it,
// and sets vals[i] to the raw value of its last member named names[i], or
// to nil when no member has that name; vals must be as long as names.
//
// It reads an object as vLLM and SGLang do (Python's json.loads, then a
// pydantic model or a dict lookup): a name matches byte for byte once its
// escapes are decoded, never case-insensitively as encoding/json matches
// struct fields ("Token_IDs" is an unknown member, not token_ids), and of
// a repeated name the last member wins outright (encoding/json would merge
// a repeated object or map into the first one's value). Members whose
// names are not in names are skipped, as those models ignore unknown
// fields. Decoding each value, with encoding/json or a scanner, is the
// caller's part; the slices point into buf.
//
// The whole object is validated as encoding/json validates it; an error is
// a *SyntaxError, and vals are then undefined. Nothing is allocated unless
// a member's name holds escapes.
func Members(buf []byte, names []string, vals [][]byte) error {
	clear(vals)
	s := Scanner{Buf: buf}
	s.WS()
	if s.Peek() != '{' {
		return s.Errorf("expected a JSON object")
	}
	err := s.Object(func(ks, ke int, esc bool) error {
		key := buf[ks+1 : ke-1]
		if esc {
			k, err := Unquote(buf[ks:ke])
			if err != nil {
				return &SyntaxError{Offset: ks, Msg: "invalid string escape"}
			}
			key = []byte(k)
		}
		vs := s.Pos
		if err := s.SkipValue(2, maxMembersDepth, math.MaxInt); err != nil {
			return err
		}
		for i, name := range names {
			if string(key) == name {
				vals[i] = buf[vs:s.Pos]
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.WS()
	if s.Pos != len(buf) {
		return s.Errorf("data after the JSON object")
	}
	return nil
}
