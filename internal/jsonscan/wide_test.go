package jsonscan

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// utf16 and utf32 encode s in the given byte order, with a byte order mark
// first when bom.
func utf16(s string, big, bom bool) []byte {
	var out []byte
	put := func(u uint16) {
		if big {
			out = append(out, byte(u>>8), byte(u))
		} else {
			out = append(out, byte(u), byte(u>>8))
		}
	}
	if bom {
		put(0xFEFF)
	}
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			put(uint16(0xD800 + r>>10))
			put(uint16(0xDC00 + r&0x3FF))
			continue
		}
		put(uint16(r))
	}
	return out
}

func utf32(s string, big, bom bool) []byte {
	var out []byte
	put := func(u uint32) {
		if big {
			out = append(out, byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
		} else {
			out = append(out, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
		}
	}
	if bom {
		put(0xFEFF)
	}
	for _, r := range s {
		put(uint32(r))
	}
	return out
}

// TestDetectWideAsPythonJSONLoads: a body Python's json.loads reads as
// UTF-16 or UTF-32 (json.detect_encoding: by a byte order mark, else by
// where the first bytes are NUL) is detected as that encoding, and its
// UTF-8 form is the text Python decodes, the mark dropped; a UTF-8 body,
// with or without its mark, is not wide.
func TestDetectWideAsPythonJSONLoads(t *testing.T) {
	const text = `{"prompt":"héllo 😀 世界","max_tokens":1}`
	for _, c := range []struct {
		body []byte
		name string
	}{
		{utf16(text, false, false), "UTF-16LE"},
		{utf16(text, true, false), "UTF-16BE"},
		{utf16(text, false, true), "UTF-16LE"},
		{utf16(text, true, true), "UTF-16BE"},
		{utf32(text, false, false), "UTF-32LE"},
		{utf32(text, true, false), "UTF-32BE"},
		{utf32(text, false, true), "UTF-32LE"},
		{utf32(text, true, true), "UTF-32BE"},
	} {
		w, ok := DetectWide(c.body)
		require.True(t, ok, c.name)
		require.Equal(t, c.name, w.Name)
		n, err := w.UTF8Len(c.body)
		require.NoError(t, err, c.name)
		out := w.AppendUTF8(make([]byte, 0, n), c.body)
		require.Len(t, out, n)
		require.Equal(t, text, string(out), c.name)
	}
	// As Python: x 00 x 00 is UTF-16LE, 00 x is UTF-16BE (a little-endian
	// U+0100 first reads big-endian, as there, and is then no JSON).
	w, ok := DetectWide(utf16(` {}`, false, false))
	require.True(t, ok)
	require.Equal(t, " {}", string(w.AppendUTF8(nil, utf16(` {}`, false, false))))
	w, ok = DetectWide(utf16("\u0100{}", false, false))
	require.True(t, ok)
	require.Equal(t, "UTF-16BE", w.Name)
	for _, body := range []string{text, "\xef\xbb\xbf" + text, "{}", "1", "", "[]\x00\x00"} {
		_, ok := DetectWide([]byte(body))
		require.False(t, ok, "%q", body)
	}
	// Two bytes: 00 x is UTF-16BE, x 00 UTF-16LE.
	w, ok = DetectWide([]byte{'1', 0})
	require.True(t, ok)
	require.Equal(t, "UTF-16LE", w.Name)
	w, ok = DetectWide([]byte{0, '1'})
	require.True(t, ok)
	require.Equal(t, "UTF-16BE", w.Name)
}

// TestWideRefusesWhatIsNotText: a body that is not whole code units, a
// UTF-16 surrogate not in a pair (Python's surrogatepass would keep it as a
// lone surrogate UTF-8 cannot carry) or a UTF-32 value that is no Unicode
// scalar is refused, the error naming the encoding.
func TestWideRefusesWhatIsNotText(t *testing.T) {
	lone := append(utf16(`{"a":"`, false, false), 0x00, 0xD8)
	lone = append(lone, utf16(`"}`, false, false)...)
	lowFirst := append(utf16(`{"a":"`, true, false), 0xDC, 0x00)
	lowFirst = append(lowFirst, utf16(`"}`, true, false)...)
	highAtEnd := append(utf16(`{"a":"`, false, false), 0x00, 0xD8)
	for name, c := range map[string]struct {
		body []byte
		msg  string
	}{
		"odd length":        {append(utf16(`{}`, false, false), 0), "UTF-16LE JSON of 5 bytes"},
		"UTF-32 not by 4":   {append(utf32(`{}`, true, false), 0, 0), "UTF-32BE JSON of 10 bytes"},
		"lone high":         {lone, "UTF-16LE JSON with an unpaired surrogate at byte 12"},
		"lone low":          {lowFirst, "UTF-16BE JSON with an unpaired surrogate at byte 12"},
		"high at the end":   {highAtEnd, "UTF-16LE JSON with an unpaired surrogate at byte 12"},
		"UTF-32 surrogate":  {append(utf32(`{`, false, false), 0x00, 0xD8, 0, 0), "UTF-32LE JSON with U+D800 at byte 4"},
		"UTF-32 past range": {append(utf32(`{`, false, false), 0, 0, 0x11, 0), "UTF-32LE JSON with U+110000 at byte 4"},
	} {
		w, ok := DetectWide(c.body)
		require.True(t, ok, name)
		_, err := w.UTF8Len(c.body)
		require.ErrorContains(t, err, c.msg, name)
	}
}
