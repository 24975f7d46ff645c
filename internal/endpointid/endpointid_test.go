package endpointid

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	for _, ok := range []string{
		"10.0.0.7:8000",
		"[fe80::1%eth0]:65535",
		strings.Repeat("a", 253) + ":65535",
	} {
		require.NoError(t, Check(ok), ok)
	}
	for _, bad := range []string{
		"",
		strings.Repeat("a", 254) + ":65535",
		strings.Repeat("h", 4<<20) + ":8000",
		"\xff:8000",
	} {
		err := Check(bad)
		require.Error(t, err)
		require.Less(t, len(err.Error()), 200, "the error stays small however long the id")
	}
}

func TestQuote(t *testing.T) {
	require.Equal(t, `"10.0.0.7:8000"`, Quote("10.0.0.7:8000"))
	q := Quote(strings.Repeat("x", 1000))
	require.Equal(t, `"`+strings.Repeat("x", 64)+`"...`, q)
}
