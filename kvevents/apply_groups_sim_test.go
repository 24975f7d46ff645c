package kvevents

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/simengine"
)

// TestHybridEnginesMatchExactly runs simulated hybrid-attention engines
// (full attention, a sliding window, with and without a Mamba group, the
// window and Mamba caches evicting on their own) beside a plain one, and
// asserts after every round that Match reports for each exactly the prefix
// the engine would reuse.
func TestHybridEnginesMatchExactly(t *testing.T) {
	const bs = 16
	r := newEngineRig(t, bs, []simengine.Config{
		{BlockSize: bs, NumGPUBlocks: 400, Hybrid: &simengine.HybridConfig{SlidingWindow: 40, WindowBlocks: 60}},
		{BlockSize: bs, NumGPUBlocks: 400, Hybrid: &simengine.HybridConfig{SlidingWindow: 33, WindowBlocks: 120, Mamba: true, MambaStates: 50}},
		{BlockSize: bs, NumGPUBlocks: 400},
	})
	rng := rand.New(rand.NewPCG(9, 4))
	prefixes := make([][]uint32, 5)
	for i := range prefixes {
		prefixes[i] = randTokens(rng, 64+rng.IntN(200))
	}
	var probes [][]uint32
	nonzero, limited := 0, 0
	for round := 0; round < 25; round++ {
		for k := 0; k < 4; k++ {
			p := append(append([]uint32(nil), prefixes[rng.IntN(len(prefixes))]...), randTokens(rng, 20+rng.IntN(200))...)
			probes = append(probes, p)
			for _, e := range r.engines {
				_, err := e.Submit(simengine.Request{Prompt: p, MaxTokens: 1 + rng.IntN(20)})
				require.NoError(t, err)
			}
		}
		for _, e := range r.engines {
			e.RunUntilIdle()
		}
		r.deliver()
		nz, _ := r.checkExact(bs, probes)
		nonzero += nz
		for _, p := range probes {
			if r.engines[1].CachedTokens(p) < r.engines[2].CachedTokens(p) {
				limited++
			}
		}
	}
	t.Logf("non-zero matches %d; probes the hybrid engine's groups cut short: %d", nonzero, limited)
	require.Zero(t, r.total.Dropped)
	require.Zero(t, r.total.Skipped)
	require.NotZero(t, limited, "the window and Mamba groups evicted on their own")
	require.Greater(t, nonzero, 100)
}
