package server

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// pyInt is the priority of a completions or chat completions request, read
// as vLLM's request models read an int (pydantic's lax mode, on what
// Python's json.loads made of the body): a JSON integer of any size, a
// number without a fractional part (1.0, 1e3), a boolean (1 or 0), or a
// string holding a decimal integer, surrounding whitespace and a
// fractional part of zeros allowed (" 7 ", "1.0"). Anything else, null
// included, is refused, as vLLM answers it 400. It keeps the integer's
// decimal text, which the render routes echo (renderEcho); the zero value
// is vLLM's default, 0.
type pyInt struct{ text string }

// errNotInt is the refusal of a priority vLLM does not read as an int.
var errNotInt = errors.New("priority: Input should be a valid integer")

// maxIntDigits is Python's default int_max_str_digits: json.loads refuses
// an integer literal with more digits, and pydantic an integer string, so
// vLLM answers such a priority 400. Reading one costs time quadratic in
// its digits, which a body of MaxBodyBytes could make minutes.
const maxIntDigits = 4300

// errIntTooLong is the refusal of a priority past maxIntDigits.
var errIntTooLong = errors.New("priority: exceeds the limit (4300 digits) for integer string conversion")

// UnmarshalJSON reads b as pyInt describes.
func (p *pyInt) UnmarshalJSON(b []byte) error {
	s := string(b)
	switch {
	case s == "true":
		p.text = "1"
		return nil
	case s == "false":
		p.text = "0"
		return nil
	case strings.HasPrefix(s, `"`):
		str, err := strconv.Unquote(s)
		if err != nil {
			return errNotInt
		}
		return p.setDecimal(strings.TrimSpace(str))
	case !strings.ContainsAny(s, ".eE"):
		return p.setDecimal(s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f != math.Trunc(f) {
		return errNotInt
	}
	n, _ := big.NewFloat(f).Int(nil)
	p.text = n.String()
	return nil
}

// setDecimal sets p to the decimal integer s: optionally signed digits,
// optionally followed by a point and zeros, at most maxIntDigits of them
// past leading zeros.
func (p *pyInt) setDecimal(s string) error {
	if i := strings.IndexByte(s, '.'); i >= 0 && strings.Trim(s[i+1:], "0") == "" {
		s = s[:i]
	}
	digits := strings.TrimLeft(s, "+-")
	if len(s)-len(digits) > 1 || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return errNotInt
	}
	sign := s[:len(s)-len(digits)]
	if digits = strings.TrimLeft(digits, "0"); len(digits) > maxIntDigits {
		return errIntTooLong
	}
	var n big.Int
	if _, ok := n.SetString(sign+"0"+digits, 10); !ok {
		return errNotInt
	}
	p.text = n.String()
	return nil
}

// MarshalJSON writes the integer (0 when none was given).
func (p pyInt) MarshalJSON() ([]byte, error) {
	if p.text == "" {
		return []byte("0"), nil
	}
	return []byte(p.text), nil
}
