package tokenload

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOpenRequestLoad(t *testing.T) {
	require.Equal(t, int64(3*1024), OpenRequestLoad(3, 1024))
	require.Zero(t, OpenRequestLoad(0, 1024))
	require.Zero(t, OpenRequestLoad(-2, 1024))
	require.Zero(t, OpenRequestLoad(5, 0))
	require.Zero(t, OpenRequestLoad(5, -1))
	require.Equal(t, int64(math.MaxInt64), OpenRequestLoad(math.MaxInt64/2, 4), "saturates")
	// Added to committed tokens, it orders a streaming-busy endpoint below an idle one.
	busy := Score(0+OpenRequestLoad(40, DefaultOpenRequestTokens), 2048, 0)
	idle := Score(0, 2048, 0)
	require.Less(t, busy, idle)
}
