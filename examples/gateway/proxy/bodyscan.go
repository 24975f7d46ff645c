package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/kvroute/kvroute/internal/jsonstr"
)

// errNotObject is returned by bodyModel for a body that is not a JSON
// object.
var errNotObject = errors.New("not a JSON object")

// maxScanDepth bounds the nesting bodyModel follows, so that a hostile body
// cannot exhaust the stack.
const maxScanDepth = 512

// bodyModel validates body as one JSON object and returns its top-level
// "model" member ("" when absent or null; the last one when repeated). It is
// the only field the gateway reads, and a prompt of thousands of tokens made
// encoding/json (validation pass plus decode) a fifth of the gateway's own
// CPU per request; this is one pass that builds no values. It accepts
// exactly what encoding/json accepts as an object (invalid UTF-8 included),
// except that the key must be "model" exactly, as the engines read it, not
// a case-insensitive match.
func bodyModel(body []byte) (string, error) {
	s := bodyScanner{b: body}
	s.ws()
	if !s.eat('{') {
		return "", errNotObject
	}
	model := ""
	s.ws()
	if !s.eat('}') {
		for {
			s.ws()
			ks, ke, esc, err := s.str()
			if err != nil {
				return "", err
			}
			isModel := string(body[ks:ke]) == `"model"`
			if esc {
				var k string
				isModel = json.Unmarshal(body[ks:ke], &k) == nil && k == "model"
			}
			s.ws()
			if !s.eat(':') {
				return "", s.errorf("expected ':'")
			}
			s.ws()
			vs := s.i
			escaped := false
			if isModel && s.i < len(body) && body[s.i] == '"' {
				_, _, escaped, err = s.str() // the scan says whether it holds escapes
			} else {
				err = s.value(2)
			}
			if err != nil {
				return "", err
			}
			if isModel {
				switch v := body[vs:s.i]; v[0] {
				case '"':
					// A plain name (no escapes, valid UTF-8) is its bytes;
					// only others go through the decoder.
					if in := v[1 : len(v)-1]; !escaped && utf8.Valid(in) {
						model = string(in)
					} else if err := json.Unmarshal(v, &model); err != nil {
						return "", err
					}
				case 'n':
					model = ""
				default:
					return "", s.errorf("model must be a string")
				}
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			if s.eat('}') {
				break
			}
			return "", s.errorf("expected ',' or '}'")
		}
	}
	s.ws()
	if s.i != len(body) {
		return "", s.errorf("data after the JSON object")
	}
	return model, nil
}

// bodyScanner walks a JSON text without building values.
type bodyScanner struct {
	b []byte
	i int
}

func (s *bodyScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", s.i, fmt.Sprintf(format, args...))
}

func (s *bodyScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *bodyScanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str scans a string at s.i and returns its span (quotes included) and
// whether it holds escapes.
func (s *bodyScanner) str() (start, end int, escaped bool, err error) {
	start = s.i
	end, escaped, serr := jsonstr.StringEnd(s.b, s.i)
	if serr != nil {
		s.i = serr.Offset
		return 0, 0, false, s.errorf("%s", serr.Msg)
	}
	s.i = end
	return start, end, escaped, nil
}

// value skips one JSON value at s.i; depth is the nesting it has if it is
// an object or an array (the body's object is depth 1).
func (s *bodyScanner) value(depth int) error {
	if s.i >= len(s.b) {
		return s.errorf("unexpected end")
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, _, err := s.str()
		return err
	case (c == '{' || c == '[') && depth > maxScanDepth:
		return s.errorf("nested deeper than %d", maxScanDepth)
	case c == '{':
		s.i++
		s.ws()
		if s.eat('}') {
			return nil
		}
		for {
			s.ws()
			if _, _, _, err := s.str(); err != nil {
				return err
			}
			s.ws()
			if !s.eat(':') {
				return s.errorf("expected ':'")
			}
			s.ws()
			if err := s.value(depth + 1); err != nil {
				return err
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			if s.eat('}') {
				return nil
			}
			return s.errorf("expected ',' or '}'")
		}
	case c == '[':
		s.i++
		s.ws()
		if s.eat(']') {
			return nil
		}
		for {
			s.ws()
			if err := s.value(depth + 1); err != nil {
				return err
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			if s.eat(']') {
				return nil
			}
			return s.errorf("expected ',' or ']'")
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	}
	return s.errorf("unexpected character %q", s.b[s.i])
}

func (s *bodyScanner) literal(lit string) error {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return s.errorf("invalid literal")
	}
	s.i += len(lit)
	return nil
}

// number skips a number with JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *bodyScanner) number() error {
	s.eat('-')
	switch {
	case s.eat('0'):
	case s.digits() == 0:
		return s.errorf("invalid number")
	}
	if s.eat('.') && s.digits() == 0 {
		return s.errorf("invalid number")
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		if s.digits() == 0 {
			return s.errorf("invalid number")
		}
	}
	return nil
}

func (s *bodyScanner) digits() int {
	n := 0
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}
