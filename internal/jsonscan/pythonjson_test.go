package jsonscan

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// errRefused is what the tests' reserve answers when it has no room.
var errRefused = errors.New("no room")

// PythonJSON reads a body as json.loads does: a UTF-8 body past one
// leading mark, in body's own array and without asking reserve; a UTF-16
// or UTF-32 one as the UTF-8 text it encodes, reserve asked once for
// exactly the copy's size; a wide body that is not text refused with the
// error naming its encoding, reserve not asked.
func TestPythonJSONReadsAsJSONLoads(t *testing.T) {
	const text = `{"prompt":"héllo 😀 世界","max_tokens":1}`
	for _, body := range [][]byte{[]byte(text), []byte("\xef\xbb\xbf" + text), {}, nil} {
		out, err := PythonJSON(body, func(int) error { t.Fatalf("reserve called for %q", body); return nil })
		require.NoError(t, err)
		require.Equal(t, string(TrimBOM(body)), string(out))
		if len(out) > 0 {
			require.Same(t, &body[len(body)-1], &out[len(out)-1], "shares body's array")
		}
	}
	for _, body := range [][]byte{utf16(text, false, true), utf16(text, true, false), utf32(text, false, false), utf32(text, true, true)} {
		asked := 0
		out, err := PythonJSON(body, func(n int) error { asked++; require.Equal(t, len(text), n); return nil })
		require.NoError(t, err)
		require.Equal(t, 1, asked)
		require.Equal(t, text, string(out))
		require.Equal(t, len(text), cap(out), "the copy is the size reserved")
		out, err = PythonJSON(body, nil)
		require.NoError(t, err)
		require.Equal(t, text, string(out))
	}
	bad := append(utf16(`{"a":"`, false, false), 0x00, 0xD8)
	out, err := PythonJSON(bad, func(int) error { t.Fatal("reserve called for a body that is not text"); return nil })
	require.Nil(t, out)
	require.EqualError(t, err, "the body is UTF-16LE JSON with an unpaired surrogate at byte 12")
}

// A refusal of reserve is returned as is, before anything is copied: no
// allocation is made for a wide body the caller has no room for.
func TestPythonJSONRefusedCopiesNothing(t *testing.T) {
	body := utf32(`{"prompt":"a long prompt"}`, false, true)
	refuse := func(int) error { return errRefused }
	out, err := PythonJSON(body, refuse)
	require.Nil(t, out)
	require.ErrorIs(t, err, errRefused)
	require.Zero(t, testing.AllocsPerRun(100, func() { _, _ = PythonJSON(body, refuse) }))
}
