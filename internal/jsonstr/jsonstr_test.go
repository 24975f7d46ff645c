package jsonstr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStringEndAcceptsWhatEncodingJSONAccepts(t *testing.T) {
	long := strings.Repeat("abcdefgh", 40)
	for _, s := range []string{`""`, `"a"`, `"` + long + `"`, `"` + long + `\n"`, `"\"\\\/\b\f\n\r\t"`,
		`"\u00e9\uD83D\uDE00\ud800"`, "\"caf\xc3\xa9 \xff\"", `"` + strings.Repeat(`x\"`, 100) + `"`} {
		for pad := range 40 { // every alignment of the specials against the word steps
			in := strings.Repeat(" ", pad) + s + `,"next"`
			end, esc, err := StringEnd([]byte(in), pad)
			require.Nil(t, err, "%q", in)
			require.Equal(t, pad+len(s), end, "%q", in)
			require.Equal(t, strings.Contains(s, `\`), esc, "%q", in)
		}
	}
}

func TestStringEndRejectsWhatEncodingJSONRejects(t *testing.T) {
	long := strings.Repeat("abcdefgh", 40)
	for _, c := range []struct{ in, msg string }{
		{`x"`, MsgNotString},
		{``, MsgNotString},
		{`"abc`, MsgUnterminated},
		{`"` + long, MsgUnterminated},
		{`"abc\`, MsgUnterminated},
		{"\"" + long + "\x1f\"", MsgControl},
		{"\"a\tb\"", MsgControl},
		{`"` + long + `\x"`, MsgEscape},
		{`"\u12g4"`, MsgUnicode},
		{`"\u12"`, MsgUnicode},
	} {
		_, _, err := StringEnd([]byte(c.in), 0)
		require.NotNil(t, err, "%q", c.in)
		require.Equal(t, c.msg, err.Msg, "%q", c.in)
		require.False(t, json.Valid([]byte(c.in)), "%q", c.in)
	}
	_, _, err := StringEnd([]byte("\""+long+"\x01\""), 0)
	require.Equal(t, 1+len(long), err.Offset, "the offset of the control byte")
	require.Equal(t, MsgControl, err.Error())
}

// A control byte is found at every position and alignment, among bytes
// that are not controls (UTF-8, DEL, 0xff).
func TestControlAtEveryPosition(t *testing.T) {
	for n := 0; n < 80; n++ {
		b := []byte(strings.Repeat("a\xc3\xa9~ \x7f\xff", 12))[:n]
		require.Equal(t, -1, controlAt(b), "clean %q", b)
		for i := range b {
			for _, c := range []byte{0x00, 0x01, 0x1f} {
				d := append([]byte(nil), b...)
				d[i] = c
				require.Equal(t, i, controlAt(d), "control byte %#x at %d of %d", c, i, n)
				_, _, err := StringEnd([]byte(`"`+string(d)+`"`), 0)
				require.NotNil(t, err)
				require.Equal(t, MsgControl, err.Msg)
				require.Equal(t, 1+i, err.Offset)
			}
		}
	}
}

// FuzzStringEnd checks StringEnd against encoding/json: a prefix up to the
// returned end is exactly a valid JSON string (json.Valid), and an error
// means no prefix is one.
func FuzzStringEnd(f *testing.F) {
	for _, s := range []string{`"a"`, `"a\"b" x`, `"\u00e9"`, "\"\x01\"", `"\q"`, `"abc`, `"` + strings.Repeat(`ab\n`, 30) + `"`,
		"\"\xff\xfe\"", `"` + strings.Repeat("x", 70) + `"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, esc, err := StringEnd(b, 0)
		if err != nil {
			// No prefix ending in a quote is a valid string.
			for i := 1; i <= len(b); i++ {
				if b[0] == '"' && b[i-1] == '"' && i > 1 {
					require.False(t, json.Valid(b[:i]), "%q: error %v but %q is valid", b, err, b[:i])
				}
			}
			return
		}
		require.True(t, json.Valid(b[:end]), "%q: end %d", b, end)
		require.Equal(t, bytes.IndexByte(b[1:end], '\\') >= 0, esc)
		var s string
		require.NoError(t, json.Unmarshal(b[:end], &s))
	})
}

func ExampleStringEnd() {
	body := []byte(`{"prompt":"say \"hi\"\n","model":"m"}`)
	end, escaped, err := StringEnd(body, 10)
	fmt.Println(string(body[10:end]), escaped, err == nil)
	_, _, err = StringEnd([]byte("\"tab\there\""), 0)
	fmt.Println(err.Msg, "at", err.Offset)
	// Output:
	// "say \"hi\"\n" true true
	// control character in string at 4
}
