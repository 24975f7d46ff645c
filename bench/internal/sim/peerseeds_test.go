package sim

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPeerSeedSweep: every policy runs on every seed, seed k is Config.Seed
// k, the sweep is deterministic whatever the parallelism, and the
// statistics are those of the per-seed p90s.
func TestPeerSeedSweep(t *testing.T) {
	base := Quick(1.5)
	base.Workload.Requests = 80
	ws := []Workload{base.Workload}
	rows, err := PeerSeedSweep(context.Background(), base, ws, []float64{1.5}, []uint64{1, 2}, 2)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	for _, p := range append([]Policy{KVRoute}, PeerPolicies...) {
		require.Len(t, rows[0].TTFTP90[p], 2, p)
	}
	cfg := base
	cfg.Load, cfg.Seed = 1.5, 2
	r, err := Run(cfg, Dynamo)
	require.NoError(t, err)
	require.Equal(t, r.TTFTP90, rows[0].TTFTP90[Dynamo][1], "seed k is Config.Seed k")
	again, err := PeerSeedSweep(context.Background(), base, ws, []float64{1.5}, []uint64{1, 2}, 1)
	require.NoError(t, err)
	require.Equal(t, rows, again)

	row := PeerSeedRow{Workload: SharedPrefix, Load: 1, Seeds: []uint64{1, 2, 3}, TTFTP90: map[Policy][]time.Duration{
		KVRoute:      {90, 100, 130},
		Dynamo:       {100, 110, 120}, // mean 110: the best peer
		SGLang:       {200, 200, 200},
		SGLangEvents: {95, 150, 150},
	}}
	require.Equal(t, Dynamo, row.BestPeer())
	require.InDelta(t, 320.0/330-1, row.Ratio(), 1e-12)
	require.Equal(t, 2, row.Below(), "seeds 1 and 2; on seed 3 Dynamo is faster")
	require.True(t, row.OK())
	lo, hi := row.CI()
	require.LessOrEqual(t, lo, row.Ratio())
	require.GreaterOrEqual(t, hi, row.Ratio())
	row.TTFTP90[SGLangEvents] = []time.Duration{90, 100, 130} // a tie on the mean is not "below"
	require.False(t, row.OK())

	var md bytes.Buffer
	met, total, err := WritePeerSeedTable(&md, rows)
	require.NoError(t, err)
	require.Equal(t, 1, total)
	require.Equal(t, rows[0].OK(), met == 1)
	require.Contains(t, md.String(), "over 2 traffic seeds")
	_, err = PeerSeedSweep(context.Background(), base, ws, []float64{1.5}, nil, 1)
	require.ErrorIs(t, err, ErrInvalidConfig)
}
