package server

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A decoder's transfer wait saturates at the longest Duration: a slow
// transfer at a large TimeScale past int64's range was converted to a
// negative duration on amd64, and the decoder did not wait at all.
func TestPDTransferTimeSaturates(t *testing.T) {
	require.Equal(t, 2*time.Millisecond, transferTime(400, 5*time.Microsecond, 1))
	require.Equal(t, time.Duration(math.MaxInt64), transferTime(4096, time.Hour, 1e6))
	require.Equal(t, time.Duration(0), transferTime(4096, 0, 1e6))
}
