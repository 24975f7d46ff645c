package sidecar

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// parseObject allocates its members and no more: the members' raw values,
// together as long as the body, are what copyMembers charges. Before, a
// json.Decoder read the body into a buffer of its own first, a copy of
// the whole body that nothing charged.
func TestParseObjectMakesNoCopyOfTheBody(t *testing.T) {
	body := []byte(`{"model":"m","prompt":"` + strings.Repeat("x", 4<<20) + `"}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m, err := parseObject(body)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Len(t, m["prompt"], 4<<20+2)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(len(body))*5/4,
		"the members' copy of the body, and nothing the size of the body besides")
}

// parseObject refuses whatever follows the object but whitespace, as
// Python's json.loads does ("Extra data").
func TestParseObjectRefusesTrailingData(t *testing.T) {
	for _, b := range []string{`{"a":1} {"b":2}`, `{"a":1}]`, `{"a":1}}`, `{"a":1} x`, `null`, `[1]`} {
		_, err := parseObject([]byte(b))
		require.ErrorIs(t, err, ErrBadRequest, b)
	}
	m, err := parseObject([]byte(" {\"a\":1} \n\t"))
	require.NoError(t, err)
	require.Equal(t, "1", string(m["a"]))
}
