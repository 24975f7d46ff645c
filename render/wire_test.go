package render

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// The render copy's parts point into the client's body (no copy of the
// prompt), and read as exactly the bytes prepareBody's flattening gives,
// by Read with any buffer size, by WriteTo, and again from a fresh reader.
func TestPrepareWireSendsTheEditsWithoutCopyingThePrompt(t *testing.T) {
	prompt := strings.Repeat("w ", 5000)
	body := []byte(`{"model":"m","prompt":"` + prompt + `","max_tokens":512,"min_tokens":3}`)
	w, _, _, err := prepareWire(body, true, true)
	require.NoError(t, err)
	first, ok := w.part(0)
	require.True(t, ok)
	require.Same(t, &body[0], &first[0], "the first part is the client's bytes")
	want := `{"model":"m","prompt":"` + prompt + `","max_tokens":1,"min_tokens":0,"return_mm_kwargs":false}`
	require.Equal(t, want, string(w.bytes()))
	require.Equal(t, int64(len(want)), w.size)
	for _, n := range []int{1, 3, 7, 4096, 1 << 20} {
		got, err := io.ReadAll(io.LimitReader(readerOfSize{w.reader(), n}, 1<<30))
		require.NoError(t, err)
		require.Equal(t, want, string(got), "reads of %d bytes", n)
	}
	require.NoError(t, iotest.TestReader(w.reader(), []byte(want)))
	var buf bytes.Buffer
	n, err := w.reader().(io.WriterTo).WriteTo(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), n)
	require.Equal(t, want, buf.String())

	// A value that already is the edit is not split out.
	w, _, _, err = prepareWire([]byte(`{"prompt":"x","max_tokens":1}`), true, false)
	require.NoError(t, err)
	require.Equal(t, 1, w.n, "nothing to splice")
	require.Equal(t, `{"prompt":"x","max_tokens":1}`, string(w.bytes()))
}

// More parts than the inline array holds (repeated keys) still read in
// order.
func TestWireBodyBeyondInlineParts(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"prompt":"x"`)
	for i := range 12 {
		b.WriteString(`,"max_tokens":` + strconv.Itoa(100+i))
	}
	b.WriteString("}")
	w, _, _, err := prepareWire([]byte(b.String()), true, true)
	require.NoError(t, err)
	require.NotEmpty(t, w.more)
	got, err := io.ReadAll(w.reader())
	require.NoError(t, err)
	require.Equal(t, `{"prompt":"x"`+strings.Repeat(`,"max_tokens":1`, 12)+`,"return_mm_kwargs":false}`, string(got))
	require.Equal(t, string(got), string(w.bytes()))
}

// readerOfSize reads at most n bytes per Read.
type readerOfSize struct {
	r io.Reader
	n int
}

func (r readerOfSize) Read(p []byte) (int, error) { return r.r.Read(p[:min(len(p), r.n)]) }
