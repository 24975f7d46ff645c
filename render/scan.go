package render

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kvroute/kvroute/internal/jsonstr"
)

// maxDepth bounds the nesting of skipped JSON values, so that a hostile body
// cannot exhaust the stack.
const maxDepth = 256

// scanner is a small JSON reader over a byte slice: it reads the few fields
// the client needs and skips the rest without building values. It never
// panics on malformed input; every method reports an error instead, and it
// accepts exactly the documents json.Valid accepts (FuzzScannerMatchesEncodingJSON),
// nesting beyond maxDepth aside.
//
// It exists because the fair rival, encoding/json decoding a render response
// into a struct of only the fields read here, is several times slower: on a
// 2,048-token response, alternating the two in one loop
// (BenchmarkScanVersusEncodingJSON, GOMAXPROCS=2, Go 1.26, a shared and
// loaded 2-core VM), encoding/json took about 8× as long (6.7–10× over five
// runs), and every microsecond here is on each request's time to first token.
type scanner struct {
	b []byte
	i int
}

var errSyntax = errors.New("invalid JSON")

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", errSyntax, s.i, fmt.Sprintf(format, args...))
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) consume(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// trailer accepts only whitespace after the top-level value.
func (s *scanner) trailer() error {
	s.ws()
	if s.i != len(s.b) {
		return s.errorf("data after the JSON value")
	}
	return nil
}

// literal consumes lit (true, false, null).
func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// stringEnd returns the index just past the closing quote of the string that
// starts at s.i, and whether it contains escapes. It validates the string as
// encoding/json does (jsonstr.StringEnd): escapes are one of \" \\ \/ \b \f
// \n \r \t or \u and four hex digits, and no byte below 0x20 appears
// unescaped (invalid UTF-8 and lone surrogate escapes are accepted, as
// encoding/json accepts them).
func (s *scanner) stringEnd() (end int, escaped bool, err error) {
	end, escaped, serr := jsonstr.StringEnd(s.b, s.i)
	if serr != nil {
		at := s.i
		s.i = serr.Offset
		err = s.errorf("%s", serr.Msg)
		s.i = at
		return 0, false, err
	}
	return end, escaped, nil
}

// str reads a string value.
func (s *scanner) str() (string, error) {
	start := s.i
	end, escaped, err := s.stringEnd()
	if err != nil {
		return "", err
	}
	s.i = end
	if !escaped {
		return string(s.b[start+1 : end-1]), nil
	}
	v, err := unquote(s.b[start:end])
	if err != nil {
		return "", s.errorf("invalid string escape")
	}
	return v, nil
}

// rawKey reads an object key and returns its bytes without copying when it
// has no escapes (the common case); escaped keys are decoded.
func (s *scanner) rawKey() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.errorf("expected an object key")
	}
	start := s.i
	end, escaped, err := s.stringEnd()
	if err != nil {
		return nil, err
	}
	s.i = end
	if !escaped {
		return s.b[start+1 : end-1], nil
	}
	v, err := unquote(s.b[start:end])
	if err != nil {
		return nil, s.errorf("invalid string escape")
	}
	return []byte(v), nil
}

// unquote decodes a quoted JSON string with escapes.
func unquote(raw []byte) (string, error) {
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	return v, nil
}

// skipValue skips one JSON value, validating its structure.
func (s *scanner) skipValue(depth int) error {
	if depth > maxDepth {
		return s.errorf("nesting deeper than %d", maxDepth)
	}
	switch c := s.peek(); {
	case c == '"':
		end, _, err := s.stringEnd()
		if err != nil {
			return err
		}
		s.i = end
		return nil
	case c == '{':
		s.i++
		s.ws()
		if s.consume('}') {
			return nil
		}
		for {
			s.ws()
			end, _, err := s.stringEnd()
			if err != nil {
				return err
			}
			s.i = end
			s.ws()
			if !s.consume(':') {
				return s.errorf("expected ':'")
			}
			s.ws()
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			s.ws()
			if s.consume(',') {
				continue
			}
			if s.consume('}') {
				return nil
			}
			return s.errorf("expected ',' or '}'")
		}
	case c == '[':
		s.i++
		s.ws()
		if s.consume(']') {
			return nil
		}
		for {
			s.ws()
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			s.ws()
			if s.consume(',') {
				continue
			}
			if s.consume(']') {
				return nil
			}
			return s.errorf("expected ',' or ']'")
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return s.skipNumber()
	case s.literal("true"), s.literal("false"), s.literal("null"):
		return nil
	}
	return s.errorf("unexpected character")
}

// skipNumber skips a JSON number, validating its grammar.
func (s *scanner) skipNumber() error {
	s.consume('-')
	switch {
	case s.consume('0'):
	case s.digits() > 0:
	default:
		return s.errorf("invalid number")
	}
	if s.consume('.') && s.digits() == 0 {
		return s.errorf("invalid number")
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if s.digits() == 0 {
			return s.errorf("invalid number")
		}
	}
	return nil
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// uint reads a non-negative integer literal no larger than limit. Negative,
// fractional and exponent forms are errors, because token IDs and
// placeholder offsets are integers.
func (s *scanner) uint(limit uint64) (uint64, error) {
	start := s.i
	if s.peek() == '-' {
		return 0, s.errorf("negative integer")
	}
	var v uint64
	n := 0
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c < '0' || c > '9' {
			break
		}
		if n == 1 && s.b[start] == '0' {
			return 0, s.errorf("leading zero")
		}
		v = v*10 + uint64(c-'0')
		if v > limit {
			return 0, s.errorf("integer larger than %d", limit)
		}
		s.i++
		n++
	}
	if n == 0 {
		return 0, s.errorf("expected an integer")
	}
	if c := s.peek(); c == '.' || c == 'e' || c == 'E' {
		return 0, s.errorf("not an integer")
	}
	return v, nil
}
