package jsonscan

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// Wide is a UTF-16 or UTF-32 encoding of a JSON body, as Python's
// json.loads detects it in the body's bytes (json.detect_encoding): vLLM
// and SGLang read a request body with FastAPI's request.json(), which is
// json.loads on the bytes, so a body in either encoding, with or without a
// byte order mark, is a request they serve. A router that reads only UTF-8
// refused it. DetectWide finds the encoding; UTF8Len and AppendUTF8 give
// the body as the UTF-8 JSON the engine reads the same from.
type Wide struct {
	// Name is the encoding, its byte order included: "UTF-16LE",
	// "UTF-16BE", "UTF-32LE" or "UTF-32BE".
	Name string
	unit int  // 2 or 4 bytes
	big  bool // big-endian
	bom  int  // bytes of byte order mark to skip
}

// DetectWide reports whether Python's json.loads reads body as UTF-16 or
// UTF-32, and which. As json.detect_encoding: a UTF-32 byte order mark
// (00 00 FE FF, FF FE 00 00) first, then a UTF-16 one (FE FF, FF FE), the
// mark dropped; without one, a body of 4 bytes or more starting 00 00 is
// UTF-32BE, 00 x UTF-16BE, x 00 00 00 UTF-32LE, x 00 otherwise UTF-16LE; a
// body of 2 bytes 00 x is UTF-16BE, x 00 UTF-16LE. Anything else is UTF-8
// (JSON in UTF-8 starts with no NUL byte).
func DetectWide(body []byte) (Wide, bool) {
	switch {
	case len(body) >= 4 && body[0] == 0 && body[1] == 0 && body[2] == 0xFE && body[3] == 0xFF:
		return Wide{Name: "UTF-32BE", unit: 4, big: true, bom: 4}, true
	case len(body) >= 4 && body[0] == 0xFF && body[1] == 0xFE && body[2] == 0 && body[3] == 0:
		return Wide{Name: "UTF-32LE", unit: 4, bom: 4}, true
	case len(body) >= 2 && body[0] == 0xFE && body[1] == 0xFF:
		return Wide{Name: "UTF-16BE", unit: 2, big: true, bom: 2}, true
	case len(body) >= 2 && body[0] == 0xFF && body[1] == 0xFE:
		return Wide{Name: "UTF-16LE", unit: 2, bom: 2}, true
	case len(body) >= 4:
		switch {
		case body[0] == 0 && body[1] != 0:
			return Wide{Name: "UTF-16BE", unit: 2, big: true}, true
		case body[0] == 0:
			return Wide{Name: "UTF-32BE", unit: 4, big: true}, true
		case body[1] == 0 && (body[2] != 0 || body[3] != 0):
			return Wide{Name: "UTF-16LE", unit: 2}, true
		case body[1] == 0:
			return Wide{Name: "UTF-32LE", unit: 4}, true
		}
	case len(body) == 2:
		switch {
		case body[0] == 0:
			return Wide{Name: "UTF-16BE", unit: 2, big: true}, true
		case body[1] == 0:
			return Wide{Name: "UTF-16LE", unit: 2}, true
		}
	}
	return Wide{}, false
}

// UTF8Len returns the length of body, in w, as UTF-8 without the byte
// order mark, or an error naming the encoding when body is not text in it:
// a length not a whole number of code units, a code point past U+10FFFF,
// or a surrogate not in a UTF-16 pair. Python decodes the last with
// surrogatepass, giving a string with a lone surrogate that UTF-8 cannot
// carry (nor a tokenizer take); it is refused here.
func (w Wide) UTF8Len(body []byte) (int, error) {
	n := 0
	err := w.each(body, func(r rune) { n += utf8.RuneLen(r) })
	return n, err
}

// AppendUTF8 appends body, in w, to dst as UTF-8 without the byte order
// mark. body must be one UTF8Len accepts; what it refuses is left out.
func (w Wide) AppendUTF8(dst, body []byte) []byte {
	_ = w.each(body, func(r rune) { dst = utf8.AppendRune(dst, r) })
	return dst
}

// each calls f with each code point of body in w, stopping at the first
// that is not one.
func (w Wide) each(body []byte, f func(rune)) error {
	if len(body)%w.unit != 0 {
		return fmt.Errorf("the body is %s JSON of %d bytes, not a whole number of %d-byte code units", w.Name, len(body), w.unit)
	}
	order := binary.ByteOrder(binary.LittleEndian)
	if w.big {
		order = binary.BigEndian
	}
	for i := w.bom; i < len(body); i += w.unit {
		var r rune
		if w.unit == 4 {
			u := order.Uint32(body[i:])
			if u > utf8.MaxRune || (u >= 0xD800 && u < 0xE000) {
				return fmt.Errorf("the body is %s JSON with U+%04X at byte %d, not a Unicode scalar value", w.Name, u, i)
			}
			r = rune(u)
		} else {
			u := rune(order.Uint16(body[i:]))
			switch {
			case u >= 0xD800 && u < 0xDC00:
				if i+4 > len(body) {
					return fmt.Errorf("the body is %s JSON with an unpaired surrogate at byte %d", w.Name, i)
				}
				lo := rune(order.Uint16(body[i+2:]))
				if lo < 0xDC00 || lo >= 0xE000 {
					return fmt.Errorf("the body is %s JSON with an unpaired surrogate at byte %d", w.Name, i)
				}
				r = 0x10000 + (u-0xD800)<<10 + (lo - 0xDC00)
				i += 2
			case u >= 0xDC00 && u < 0xE000:
				return fmt.Errorf("the body is %s JSON with an unpaired surrogate at byte %d", w.Name, i)
			default:
				r = u
			}
		}
		f(r)
	}
	return nil
}
