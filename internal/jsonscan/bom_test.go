package jsonscan

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TrimBOM drops one leading UTF-8 byte order mark, as Python's json.loads
// reads bytes (UTF-8-sig), and nothing else: a second mark, or one after
// whitespace, stays and is still no JSON.
func TestTrimBOMDropsOneLeadingMark(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"\xef\xbb\xbf{}", "{}"},
		{"{}", "{}"},
		{"", ""},
		{"\xef\xbb", "\xef\xbb"},
		{"\xef\xbb\xbf\xef\xbb\xbf{}", "\xef\xbb\xbf{}"},
		{" \xef\xbb\xbf{}", " \xef\xbb\xbf{}"},
	} {
		got := TrimBOM([]byte(c.in))
		require.Equal(t, c.want, string(got), "%q", c.in)
	}
	require.True(t, json.Valid(TrimBOM([]byte("\xef\xbb\xbf{\"a\":1}"))))
	require.False(t, json.Valid(TrimBOM([]byte("\xef\xbb\xbf\xef\xbb\xbf{}"))))
}
