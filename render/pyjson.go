package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// pyDumps re-serializes a JSON value the way Python's json.dumps(json.loads(x))
// does with default settings, which is how vLLM formats tool-call arguments
// when it converts an Anthropic tool_use block itself:
//
//   - separators ", " and ": ";
//   - object keys in input order; a repeated key keeps its first position and
//     takes its last value (Python dict semantics);
//   - every character outside printable ASCII escaped as \uXXXX (lower-case
//     hex), with surrogate pairs above U+FFFF; \b \f \n \r \t \" \\ short;
//   - integers printed as written ("-0" becomes "0"); numbers with a fraction
//     or exponent printed like Python's float repr (1e16 -> "1e+16",
//     0.00001 -> "1e-05", 2.50 -> "2.5", 1E400 -> "Infinity").
//
// The value is decoded token by token so that key order is never lost.
func pyDumps(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := readPyValue(dec, 0)
	if err != nil {
		return "", err
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", errors.New("data after the JSON value")
	}
	var b strings.Builder
	if err := v.write(&b); err != nil {
		return "", err
	}
	return b.String(), nil
}

// pyValue is a decoded JSON value with object key order kept.
type pyValue struct {
	kind byte // 's' string, 'n' number, 't' true, 'f' false, '0' null, 'o' object, 'a' array
	str  string
	keys []string
	vals []*pyValue
}

func readPyValue(dec *json.Decoder, depth int) (*pyValue, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case string:
		return &pyValue{kind: 's', str: t}, nil
	case json.Number:
		return &pyValue{kind: 'n', str: string(t)}, nil
	case bool:
		if t {
			return &pyValue{kind: 't'}, nil
		}
		return &pyValue{kind: 'f'}, nil
	case nil:
		return &pyValue{kind: '0'}, nil
	case json.Delim:
		switch t {
		case '[':
			v := &pyValue{kind: 'a'}
			for dec.More() {
				e, err := readPyValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.vals = append(v.vals, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		case '{':
			v := &pyValue{kind: 'o'}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key is not a string")
				}
				e, err := readPyValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if i := indexOf(v.keys, k); i >= 0 {
					v.vals[i] = e
				} else {
					v.keys = append(v.keys, k)
					v.vals = append(v.vals, e)
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		}
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

func indexOf(keys []string, k string) int {
	for i, x := range keys {
		if x == k {
			return i
		}
	}
	return -1
}

func (v *pyValue) write(b *strings.Builder) error {
	switch v.kind {
	case 's':
		writePyString(b, v.str)
	case 'n':
		s, err := pyNumber(v.str)
		if err != nil {
			return err
		}
		b.WriteString(s)
	case 't':
		b.WriteString("true")
	case 'f':
		b.WriteString("false")
	case '0':
		b.WriteString("null")
	case 'a':
		b.WriteByte('[')
		for i, e := range v.vals {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := e.write(b); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case 'o':
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyString(b, k)
			b.WriteString(": ")
			if err := v.vals[i].write(b); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// writePyString writes s quoted as Python's json.dumps(ensure_ascii=True).
func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r >= 0x20 && r <= 0x7e:
				b.WriteByte(byte(r))
			case r > 0xffff:
				r -= 0x10000
				writeU4(b, 0xd800+(r>>10))
				writeU4(b, 0xdc00+(r&0x3ff))
			default:
				if r == utf8.RuneError {
					r = 0xfffd
				}
				writeU4(b, r)
			}
		}
	}
	b.WriteByte('"')
}

func writeU4(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	b.WriteByte(hexDigits[r>>12&0xf])
	b.WriteByte(hexDigits[r>>8&0xf])
	b.WriteByte(hexDigits[r>>4&0xf])
	b.WriteByte(hexDigits[r&0xf])
}

// pyNumber formats a JSON number literal as Python's json.dumps would after
// json.loads: integers unchanged (arbitrary precision), floats as repr.
func pyNumber(lit string) (string, error) {
	if !strings.ContainsAny(lit, ".eE") {
		if strings.TrimLeft(lit, "-0") == "" {
			return "0", nil
		}
		return lit, nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return "", err
	}
	return pyFloatRepr(f), nil
}

// pyFloatRepr formats f like Python's repr(float): the shortest digits that
// round-trip, fixed notation for decimal exponents in [-4, 16), scientific
// otherwise with a sign and at least two exponent digits, and ".0" on
// integral values.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // "-d.ddde±XX"
	neg := strings.HasPrefix(e, "-")
	e = strings.TrimPrefix(e, "-")
	ePos := strings.IndexByte(e, 'e')
	digits := strings.Replace(e[:ePos], ".", "", 1)
	exp, _ := strconv.Atoi(e[ePos+1:])
	decpt := exp + 1 // position of the decimal point relative to digits
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	switch {
	case decpt > -4 && decpt <= 16:
		switch {
		case decpt <= 0:
			b.WriteString("0.")
			b.WriteString(strings.Repeat("0", -decpt))
			b.WriteString(digits)
		case decpt >= len(digits):
			b.WriteString(digits)
			b.WriteString(strings.Repeat("0", decpt-len(digits)))
			b.WriteString(".0")
		default:
			b.WriteString(digits[:decpt])
			b.WriteByte('.')
			b.WriteString(digits[decpt:])
		}
	default:
		b.WriteByte(digits[0])
		if len(digits) > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		x := decpt - 1
		if x < 0 {
			b.WriteByte('-')
			x = -x
		} else {
			b.WriteByte('+')
		}
		if x < 10 {
			b.WriteByte('0')
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String()
}
