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
// Input that is not valid UTF-8 is an error, as it is for CPython's
// json.loads of a decoded request body. A \uD800-\uDFFF escape that is not
// half of a surrogate pair stays a lone surrogate and is written back as the
// same escape, as CPython does (encoding/json would turn it into U+FFFD).
//
// The value is decoded token by token so that key order is never lost.
func pyDumps(raw []byte) (string, error) {
	if !utf8.Valid(raw) {
		return "", errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := readPyValue(dec, raw, 0)
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

// pyToken reads the next token; a string that holds a surrogate escape is
// decoded from its raw bytes (raw[before:after] holds only separators, white
// space and the string) so that lone surrogates survive.
func pyToken(dec *json.Decoder, raw []byte) (json.Token, error) {
	before := dec.InputOffset()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if _, ok := tok.(string); ok {
		seg := raw[before:dec.InputOffset()]
		if q := bytes.IndexByte(seg, '"'); q >= 0 && hasSurrogateEscape(seg[q:]) {
			return pyUnquote(seg[q:])
		}
	}
	return tok, nil
}

// hasSurrogateEscape reports whether a quoted JSON string holds a \uD800-\uDFFF
// escape.
func hasSurrogateEscape(q []byte) bool {
	for i := 0; i+5 < len(q); i++ {
		if q[i] == '\\' {
			if q[i+1] == 'u' && (q[i+2] == 'd' || q[i+2] == 'D') && strings.IndexByte("89abcdefABCDEF", q[i+3]) >= 0 {
				return true
			}
			i++ // skip the escaped byte (\\ or \")
		}
	}
	return false
}

// pyUnquote decodes a quoted JSON string (already validated by the decoder)
// like CPython: surrogate pairs combine, and a lone surrogate is kept, stored
// as its three-byte generalized UTF-8 form (ED A0-BF xx) for writePyString.
func pyUnquote(q []byte) (string, error) {
	var b strings.Builder
	body := q[1 : len(q)-1]
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		switch body[i] {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, err := strconv.ParseUint(string(body[i+1:i+5]), 16, 16)
			if err != nil {
				return "", err
			}
			i += 4
			if r >= 0xd800 && r < 0xdc00 && i+6 < len(body) && body[i+1] == '\\' && body[i+2] == 'u' {
				if lo, err := strconv.ParseUint(string(body[i+3:i+7]), 16, 16); err == nil && lo >= 0xdc00 && lo < 0xe000 {
					b.WriteRune(rune(0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)))
					i += 6
					continue
				}
			}
			if r >= 0xd800 && r < 0xe000 {
				b.WriteByte(0xed)
				b.WriteByte(byte(0x80 | (r>>6)&0x3f))
				b.WriteByte(byte(0x80 | r&0x3f))
				continue
			}
			b.WriteRune(rune(r))
		default: // " \ /
			b.WriteByte(body[i])
		}
	}
	return b.String(), nil
}

func readPyValue(dec *json.Decoder, raw []byte, depth int) (*pyValue, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	tok, err := pyToken(dec, raw)
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
				e, err := readPyValue(dec, raw, depth+1)
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
				kt, err := pyToken(dec, raw)
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key is not a string")
				}
				e, err := readPyValue(dec, raw, depth+1)
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

// writePyString writes s quoted as Python's json.dumps(ensure_ascii=True);
// a lone surrogate (stored by pyUnquote as ED A0-BF xx) is written as its
// \uXXXX escape.
func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		if s[i] == 0xed && i+2 < len(s) && s[i+1] >= 0xa0 && s[i+1] <= 0xbf {
			writeU4(b, 0xd000|rune(s[i+1]&0x3f)<<6|rune(s[i+2]&0x3f))
			i += 3
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
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
