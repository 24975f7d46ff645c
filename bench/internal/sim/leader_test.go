package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLeaderPicksForEveryReplica: with SharedState.LeaderRTT every pick is
// replica 0's, and with a round trip far below an engine step and the load
// changes applied at once, four replicas route as one router.
func TestLeaderPicksForEveryReplica(t *testing.T) {
	one := &diagnostics{}
	want, err := runWith(exactConfig(1, SharedExact{}), KVRoute, one)
	require.NoError(t, err)
	cfg := exactConfig(4, SharedExact{})
	cfg.SharedState.LeaderRTT, cfg.SharedState.LeaderChangesInstant = time.Microsecond, true
	four := &diagnostics{}
	got, err := runWith(cfg, KVRoute, four)
	require.NoError(t, err)
	require.Len(t, four.picks, len(one.picks))
	for i, p := range four.picks {
		require.Zero(t, p.replica, "pick %d", i)
	}
	require.Equal(t, want.TTFTP90, got.TTFTP90)
	require.Equal(t, want.HitRate, got.HitRate)

	// With the load changes half a round trip late the leader's view lags
	// and the run still completes every request.
	cfg.SharedState.LeaderRTT, cfg.SharedState.LeaderChangesInstant = time.Millisecond, false
	lagged, err := runWith(cfg, KVRoute, &diagnostics{})
	require.NoError(t, err)
	require.Equal(t, want.Requests, lagged.Requests)
}
