package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/simengine"
)

// TestZipfDriftShiftsPopularity: within a phase a few groups take most of
// the traffic (Zipf), and the hottest group changes from phase to phase.
func TestZipfDriftShiftsPopularity(t *testing.T) {
	w := DefaultWorkload(ZipfDrift)
	z := newZipfGroups(w, rand.New(rand.NewPCG(1, 2)))
	u := rand.New(rand.NewPCG(3, 4))
	var hottest []int
	for p := 0; p < w.Phases; p++ {
		counts := make([]int, w.Groups)
		for i := p * z.perPhase; i < min((p+1)*z.perPhase, w.Requests); i++ {
			counts[z.group(i, u.Float64())]++
		}
		top := 0
		for g := range counts {
			if counts[g] > counts[top] {
				top = g
			}
		}
		require.Equal(t, z.perms[p][0], top, "phase %d: the rank-1 group is the hottest", p)
		// Zipf(1.1) over 150 groups gives rank 1 about 22 % of the draws.
		require.InDelta(t, 0.22, float64(counts[top])/float64(z.perPhase), 0.05, "phase %d", p)
		hottest = append(hottest, top)
	}
	require.NotEqual(t, hottest[0], hottest[1])
	require.NotEqual(t, hottest[1], hottest[2])

	// The trace uses it: the same seed gives the same prompts.
	cfg := DefaultConfig(ZipfDrift, 1)
	a, b := newTrace(cfg, simengine.DefaultStart), newTrace(cfg, simengine.DefaultStart)
	require.Equal(t, a.open[17].prompt, b.open[17].prompt)
}

func TestHeterogeneousFleet(t *testing.T) {
	cfg := DefaultConfig(Heterogeneous, 1)
	require.NoError(t, cfg.Validate())
	require.Equal(t, 4, cfg.Workload.slowEngines(8))
	require.Equal(t, 0.5, cfg.Workload.speed(3, 8))
	require.Equal(t, 1.0, cfg.Workload.speed(4, 8))
	require.Equal(t, 2, cfg.Workload.slowEngines(3), "1.5 engines round up")
	require.Equal(t, 0, DefaultConfig(SharedPrefix, 1).Workload.slowEngines(8), "only the heterogeneous workload has slow engines")
	homo := DefaultConfig(SharedPrefix, 1)
	require.InDelta(t, homo.Capacity()*6/8, cfg.Capacity(), 1e-9, "4 engines at half speed count as 2")
	require.Equal(t, 8*1024, cfg.CacheBlocks())
	bad := cfg
	bad.Workload.SlowFactor = 0.5
	require.ErrorIs(t, bad.Validate(), ErrInvalidConfig)
	bad = cfg
	bad.Workload.SlowFraction = 1.5
	require.ErrorIs(t, bad.Validate(), ErrInvalidConfig)
	z := DefaultConfig(ZipfDrift, 1)
	z.Workload.Phases = 0
	require.ErrorIs(t, z.Validate(), ErrInvalidConfig)
	z = DefaultConfig(ZipfDrift, 1)
	z.Peers.Dynamo.PrefillLoadScale = -1
	require.ErrorIs(t, z.Validate(), ErrInvalidConfig)
}
