package bytebudget

import (
	"io"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A cap lets one byte past it through, so a body over the cap shows; the
// largest cap reads the body whole instead of wrapping to nothing.
func TestLimitPastCap(t *testing.T) {
	for _, c := range []struct {
		limit int64
		want  string
	}{
		{3, "abcd"},
		{4, "abcd"},
		{10, "abcd"},
		{0, "a"},
		{math.MaxInt64, "abcd"},
	} {
		got, err := io.ReadAll(LimitPastCap(strings.NewReader("abcd"), c.limit))
		require.NoError(t, err)
		require.Equal(t, c.want, string(got), "limit %d", c.limit)
	}
}
