package replay

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseReply(t *testing.T) {
	topic := []byte("kv@10.0.0.1@m")
	for name, tc := range map[string]struct {
		frames [][]byte
		want   reply
	}{
		"current batch":           {[][]byte{{}, topic, seq8(1), []byte("p")}, reply{seq: 1, topic: topic, payload: []byte("p"), layout: LayoutCurrent}},
		"current batch, no topic": {[][]byte{{}, {}, seq8(1), []byte("p")}, reply{seq: 1, topic: []byte{}, payload: []byte("p"), layout: LayoutCurrent}},
		"legacy batch":            {[][]byte{{}, seq8(7), []byte("p")}, reply{seq: 7, payload: []byte("p"), layout: LayoutLegacy}},
		"current end":             {[][]byte{{}, {}, seq8(EndSeq), {}}, reply{end: true, seq: EndSeq, topic: []byte{}, payload: []byte{}, layout: LayoutCurrent}},
		"legacy end":              {[][]byte{{}, seq8(EndSeq), {}}, reply{end: true, seq: EndSeq, payload: []byte{}, layout: LayoutLegacy}},
		"empty payload ends":      {[][]byte{{}, seq8(3), {}}, reply{end: true, seq: 3, payload: []byte{}, layout: LayoutLegacy}},
		"no delimiter, legacy":    {[][]byte{seq8(2), []byte("p")}, reply{seq: 2, payload: []byte("p"), layout: LayoutLegacy}},
		"no delimiter, current":   {[][]byte{topic, seq8(2), []byte("p")}, reply{seq: 2, topic: topic, payload: []byte("p"), layout: LayoutCurrent}},
	} {
		got, err := parseReply(tc.frames)
		require.NoError(t, err, name)
		require.Equal(t, tc.want, got, name)
	}
	for name, frames := range map[string][][]byte{
		"nothing":     nil,
		"delimiter":   {{}},
		"one frame":   {{}, seq8(1)},
		"five frames": {{}, topic, seq8(1), []byte("p"), []byte("q")},
		"short seq":   {{}, []byte{1}, []byte("p")},
		"long seq":    {{}, topic, make([]byte, 9), []byte("p")},
	} {
		_, err := parseReply(frames)
		require.True(t, errors.Is(err, ErrMalformed), name)
	}
}

func TestParseStart(t *testing.T) {
	require.Equal(t, uint64(0), parseStart(nil))
	require.Equal(t, uint64(1), parseStart(seq8(1)))
	require.Equal(t, uint64(0x0102), parseStart([]byte{1, 2}))
	require.Equal(t, uint64(5), parseStart(append([]byte{0, 0, 0}, seq8(5)...)))
	require.Equal(t, uint64(math.MaxUint64), parseStart(append([]byte{1}, seq8(5)...)))
}

func TestLayoutValidate(t *testing.T) {
	require.NoError(t, Layout("").Validate())
	require.NoError(t, LayoutCurrent.Validate())
	require.NoError(t, LayoutLegacy.Validate())
	require.Error(t, Layout("new").Validate())
}

// FuzzParseReply: any reply either parses with an 8-byte sequence or is
// ErrMalformed; nothing panics.
func FuzzParseReply(f *testing.F) {
	f.Add([]byte{}, []byte("kv@x@m"), seq8(1), []byte("payload"), uint8(4))
	f.Add([]byte{}, seq8(1), []byte("payload"), []byte{}, uint8(3))
	f.Add([]byte{}, []byte{}, seq8(EndSeq), []byte{}, uint8(4))
	f.Fuzz(func(t *testing.T, a, b, c, d []byte, n uint8) {
		frames := [][]byte{a, b, c, d}[:n%5]
		r, err := parseReply(frames)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if r.layout != LayoutCurrent && r.layout != LayoutLegacy {
			t.Fatalf("no layout")
		}
		if !r.end && len(r.payload) == 0 {
			t.Fatalf("empty payload must be END")
		}
		_ = parseStart(a)
	})
}
