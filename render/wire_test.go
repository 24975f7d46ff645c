package render

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The render copy's parts point into the client's body and join into the
// edited body once.
func TestPrepareWireJoinsTheEditsOnce(t *testing.T) {
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
	require.Same(t, &w.flat()[0], &w.flat()[0], "joined once")

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
	require.Equal(t, `{"prompt":"x"`+strings.Repeat(`,"max_tokens":1`, 12)+`,"return_mm_kwargs":false}`, string(w.bytes()))
}
