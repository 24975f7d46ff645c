package jsonscan

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kvroute/kvroute/internal/jsonstr"
)

// ErrSyntax is what every error of this package wraps, so that a caller can
// tell malformed JSON from its own errors with errors.Is.
var ErrSyntax = errors.New("invalid JSON")

// SyntaxError is a malformed input: what was wrong (Msg) and the byte offset
// in the scanned slice where it was found (Offset). Its text is
// "invalid JSON at offset N: msg".
type SyntaxError struct {
	// Offset is the index in Scanner.Buf of the byte at fault (len(Buf)
	// when the input ended too early).
	Offset int
	// Msg says what was expected or found there.
	Msg string
}

// Error returns "invalid JSON at offset N: msg".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%v at offset %d: %s", ErrSyntax, e.Offset, e.Msg)
}

// Unwrap returns ErrSyntax.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// Scanner reads JSON in Buf from Pos on. It is a slice and an index (32
// bytes), cheap to keep on the stack; its zero value scans an empty input.
type Scanner struct {
	// Buf is the JSON text; the Scanner never writes to it.
	Buf []byte
	// Pos is the index of the next byte to read.
	Pos int
}

// Errorf returns a *SyntaxError at the current position.
func (s *Scanner) Errorf(format string, args ...any) error {
	return &SyntaxError{Offset: s.Pos, Msg: fmt.Sprintf(format, args...)}
}

// WS skips JSON whitespace (space, tab, newline, carriage return).
func (s *Scanner) WS() {
	for s.Pos < len(s.Buf) {
		switch s.Buf[s.Pos] {
		case ' ', '\t', '\n', '\r':
			s.Pos++
		default:
			return
		}
	}
}

// Peek returns the byte at Pos, or 0 at the end of the input.
func (s *Scanner) Peek() byte {
	if s.Pos < len(s.Buf) {
		return s.Buf[s.Pos]
	}
	return 0
}

// Consume moves past c if it is the byte at Pos, and says whether it was.
func (s *Scanner) Consume(c byte) bool {
	if s.Pos < len(s.Buf) && s.Buf[s.Pos] == c {
		s.Pos++
		return true
	}
	return false
}

// Literal moves past lit (true, false or null) if the input holds it at
// Pos, and says whether it did.
func (s *Scanner) Literal(lit string) bool {
	if len(s.Buf)-s.Pos >= len(lit) && string(s.Buf[s.Pos:s.Pos+len(lit)]) == lit {
		s.Pos += len(lit)
		return true
	}
	return false
}

// Digits moves past a run of ASCII digits and returns its length.
func (s *Scanner) Digits() int {
	n := 0
	for s.Pos < len(s.Buf) && '0' <= s.Buf[s.Pos] && s.Buf[s.Pos] <= '9' {
		s.Pos++
		n++
	}
	return n
}

// StringEnd returns the index just past the closing quote of the string
// that starts at Pos, and whether it holds escapes; it does not move Pos.
// It validates the string as encoding/json does: an escape is one of \" \\
// \/ \b \f \n \r \t or \u and four hex digits, and no byte below 0x20
// stands unescaped (invalid UTF-8 and lone surrogate escapes pass, as
// encoding/json lets them pass). A byte at Pos other than '"' is an error.
func (s *Scanner) StringEnd() (end int, escaped bool, err error) {
	end, escaped, serr := jsonstr.StringEnd(s.Buf, s.Pos)
	if serr != nil {
		return 0, false, &SyntaxError{Offset: serr.Offset, Msg: serr.Msg}
	}
	return end, escaped, nil
}

// SkipString moves past the string at Pos (see StringEnd) and says whether
// it holds escapes; on an error Pos stays.
func (s *Scanner) SkipString() (escaped bool, err error) {
	end, escaped, err := s.StringEnd()
	if err != nil {
		return false, err
	}
	s.Pos = end
	return escaped, nil
}

// Unquote decodes raw, one quoted JSON string with escapes, as
// encoding/json decodes it (invalid UTF-8 becomes U+FFFD).
func Unquote(raw []byte) (string, error) {
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	return v, nil
}

// SkipNumber moves past a number with JSON's grammar,
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and reports an
// "invalid number" error (with Pos where it went wrong) for anything else.
// It does not look at the byte after the number: the caller's grammar
// decides what may follow.
func (s *Scanner) SkipNumber() error {
	s.Consume('-')
	switch {
	case s.Consume('0'):
	case s.Digits() > 0:
	default:
		return s.Errorf("invalid number")
	}
	if s.Consume('.') && s.Digits() == 0 {
		return s.Errorf("invalid number")
	}
	if c := s.Peek(); c == 'e' || c == 'E' {
		s.Pos++
		if c := s.Peek(); c == '+' || c == '-' {
			s.Pos++
		}
		if s.Digits() == 0 {
			return s.Errorf("invalid number")
		}
	}
	return nil
}
