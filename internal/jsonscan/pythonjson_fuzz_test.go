package jsonscan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	stdutf16 "unicode/utf16"
	"unicode/utf8"
)

// wideText reports whether body, in w, is text as the standard library
// reads it: whole code units, each UTF-16 surrogate in a pair
// (unicode/utf16 decodes the units to the same units again), each UTF-32
// value a Unicode scalar value (utf8.ValidRune).
func wideText(w Wide, body []byte) bool {
	if len(body)%w.unit != 0 {
		return false
	}
	order := binary.ByteOrder(binary.LittleEndian)
	if w.big {
		order = binary.BigEndian
	}
	var units []uint16
	for i := w.bom; i < len(body); i += w.unit {
		if w.unit == 2 {
			units = append(units, order.Uint16(body[i:]))
		} else if !utf8.ValidRune(rune(order.Uint32(body[i:]))) {
			return false
		}
	}
	return slices.Equal(units, stdutf16.Encode(stdutf16.Decode(units)))
}

// FuzzPythonJSONMatchesEncodings holds PythonJSON, the reading of every
// client body kvroute takes, to the encodings themselves (seed corpus in
// testdata/fuzz/FuzzPythonJSONMatchesEncodings): a body that is not wide
// comes back as TrimBOM gives it, reserve not asked; a wide one that is
// text comes back as valid UTF-8 that encodes to the body again (its mark
// included), in an array of exactly the size reserve was asked for, once;
// a wide one that is not text is refused, the error naming its encoding,
// reserve not asked; and a refusal of reserve is returned, nothing copied.
func FuzzPythonJSONMatchesEncodings(f *testing.F) {
	const text = `{"prompt":"é 😀","max_tokens":1}`
	for _, b := range [][]byte{
		[]byte(text), []byte("\xef\xbb\xbf" + text), utf16(text, false, true), utf16(text, true, false),
		utf32(text, false, false), utf32(text, true, true), {0, '1'}, append(utf16(`"`, false, false), 0x00, 0xD8),
	} {
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, in []byte, refuse bool) {
		orig := bytes.Clone(in)
		asked := -1
		out, err := PythonJSON(in, func(n int) error {
			if asked >= 0 {
				t.Fatalf("%q: reserve asked twice", in)
			}
			asked = n
			if refuse {
				return errRefused
			}
			return nil
		})
		if !bytes.Equal(in, orig) {
			t.Fatalf("%q: the body was changed", orig)
		}
		w, wide := DetectWide(in)
		switch {
		case !wide:
			if err != nil || asked >= 0 || !bytes.Equal(out, TrimBOM(in)) {
				t.Fatalf("%q: UTF-8 body read as %q (%v), reserve asked %d", in, out, err, asked)
			}
		case !wideText(w, in):
			if err == nil || errors.Is(err, errRefused) || !strings.Contains(err.Error(), w.Name) || asked >= 0 || out != nil {
				t.Fatalf("%q: %s body that is not text read as %q (%v), reserve asked %d", in, w.Name, out, err, asked)
			}
		case refuse:
			if !errors.Is(err, errRefused) || out != nil || asked < 0 {
				t.Fatalf("%q: refused reserve gave %q (%v)", in, out, err)
			}
		default:
			if err != nil || len(out) != asked || cap(out) != asked || !utf8.Valid(out) {
				t.Fatalf("%q: %s body read as %q (%v), reserve asked %d", in, w.Name, out, err, asked)
			}
			var again []byte
			if w.unit == 2 {
				again = utf16(string(out), w.big, w.bom > 0)
			} else {
				again = utf32(string(out), w.big, w.bom > 0)
			}
			if !bytes.Equal(again, in) {
				t.Fatalf("%q: %s body read as %q, which encodes to %q", in, w.Name, out, again)
			}
		}
	})
}
