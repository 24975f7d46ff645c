package render

import "github.com/kvroute/kvroute/internal/jsonscan"

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
//
// The lexical work (whitespace, strings, literals, numbers, skipping a value)
// is internal/jsonscan's, shared with the gateway; this type adds
// the render client's grammar (object keys, token IDs, its messages). Its
// errors are jsonscan.SyntaxError values, "invalid JSON at offset N: ...",
// and wrap jsonscan.ErrSyntax.
type scanner struct {
	b []byte
	i int
}

// view returns the shared lexical scanner at s's position. The methods below
// run one jsonscan method on it and store the position back; each is small
// enough to inline, so the copy costs a register move, not a call.
func (s *scanner) view() jsonscan.Scanner { return jsonscan.Scanner{Buf: s.b, Pos: s.i} }

func (s *scanner) errorf(format string, args ...any) error {
	v := s.view()
	return v.Errorf(format, args...)
}

func (s *scanner) ws() {
	v := s.view()
	v.WS()
	s.i = v.Pos
}

func (s *scanner) peek() byte {
	v := s.view()
	return v.Peek()
}

func (s *scanner) consume(c byte) bool {
	v := s.view()
	ok := v.Consume(c)
	s.i = v.Pos
	return ok
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
	v := s.view()
	ok := v.Literal(lit)
	s.i = v.Pos
	return ok
}

// stringEnd returns the index just past the closing quote of the string that
// starts at s.i, and whether it contains escapes, validating it as
// encoding/json does (jsonscan.Scanner.StringEnd); s.i does not move.
func (s *scanner) stringEnd() (end int, escaped bool, err error) {
	v := s.view()
	return v.StringEnd()
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
func unquote(raw []byte) (string, error) { return jsonscan.Unquote(raw) }

// skipValue skips one JSON value at nesting depth, validating its structure;
// any value (not only an object or array) deeper than maxDepth is an error.
func (s *scanner) skipValue(depth int) error {
	v := s.view()
	err := v.SkipValue(depth, maxDepth, maxDepth)
	s.i = v.Pos
	return err
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
