package jsonids

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseLaxReadsIDsAsPydantic reads a list of token IDs as vLLM's
// GenerateRequest (token_ids: list[int], pydantic's lax mode) reads it.
// The wants are pydantic 2's on json.loads of each input; nil is an error.
func TestParseLaxReadsIDsAsPydantic(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []uint32
	}{
		{`[1,2,3]`, []uint32{1, 2, 3}},
		{`[]`, []uint32{}},
		{`[1.0, 2]`, []uint32{1, 2}},
		{`[1e2, 2E0]`, []uint32{100, 2}},
		{`["3", " 4 ", "5.00", "+6", "1_0"]`, []uint32{3, 4, 5, 6, 10}},
		{`[true, false]`, []uint32{1, 0}},
		{`[4294967295.0]`, []uint32{4294967295}},
		{`[4294967296.0]`, nil},
		{`[1.5]`, nil},
		{`["1e2"]`, nil},
		{`[null]`, nil},
		{`[1, null]`, nil},
		{`[-1.0]`, nil},
		{`[[1]]`, nil},
		{`["x"]`, nil},
		{`{"0":1}`, nil},
		{`"1"`, nil},
	} {
		got, err := ParseLax([]byte(tc.in))
		if tc.want == nil {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}
