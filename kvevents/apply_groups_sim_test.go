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
		{BlockSize: bs, NumGPUBlocks: 400, Hybrid: &simengine.HybridConfig{SlidingWindow: 40}},
		{BlockSize: bs, NumGPUBlocks: 400, Hybrid: &simengine.HybridConfig{SlidingWindow: 33, Mamba: true}},
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

// TestHybridEnginesWithGroupsNumberedByFirstLayerMatchExactly runs
// simulated hybrid engines that number their KV-cache groups as vLLM does
// for a model whose first layer is sliding-window (Gemma 2 and 3: the
// window is group 0, its stores go out before the full-attention store of
// the same blocks) or Mamba (Jamba), beside one that puts full attention
// first, through the wire encoding into the index, and asserts after every
// round that Match reports for each exactly the prefix the engine would
// reuse.
func TestHybridEnginesWithGroupsNumberedByFirstLayerMatchExactly(t *testing.T) {
	const bs = 16
	hybrid := func(order string) *simengine.HybridConfig {
		return &simengine.HybridConfig{SlidingWindow: 33, Mamba: true, GroupOrder: order}
	}
	r := newEngineRig(t, bs, []simengine.Config{
		{BlockSize: bs, NumGPUBlocks: 300, Hybrid: hybrid(simengine.OrderWindowFirst)},
		{BlockSize: bs, NumGPUBlocks: 300, Hybrid: hybrid(simengine.OrderMambaFirst)},
		{BlockSize: bs, NumGPUBlocks: 300, Hybrid: hybrid(simengine.OrderFullFirst)},
	})
	rng := rand.New(rand.NewPCG(5, 11))
	prefixes := make([][]uint32, 5)
	for i := range prefixes {
		prefixes[i] = randTokens(rng, 64+rng.IntN(200))
	}
	var probes [][]uint32
	nonzero, groupFirst := 0, 0
	for round := 0; round < 20; round++ {
		for k := 0; k < 4; k++ {
			p := append(append([]uint32(nil), prefixes[rng.IntN(len(prefixes))]...), randTokens(rng, 20+rng.IntN(200))...)
			probes = append(probes, p)
			mt := 1 + rng.IntN(20)
			for _, e := range r.engines {
				_, err := e.Submit(simengine.Request{Prompt: p, MaxTokens: mt})
				require.NoError(t, err)
			}
		}
		for _, e := range r.engines {
			e.RunUntilIdle()
		}
		for _, b := range r.pending[0] {
			for _, ev := range b.Events {
				if ev.Type == simengine.BlockStored && ev.GroupIdx == 0 {
					require.Equal(t, simengine.KindSlidingWindow, ev.Kind)
					groupFirst++
				}
			}
		}
		r.deliver()
		nz, _ := r.checkExact(bs, probes)
		nonzero += nz
		for _, p := range probes {
			// The three engines cache the same, whatever their numbering.
			require.Equal(t, r.engines[2].CachedTokens(p), r.engines[0].CachedTokens(p))
			require.Equal(t, r.engines[2].CachedTokens(p), r.engines[1].CachedTokens(p))
		}
	}
	t.Logf("non-zero matches %d; window stores numbered 0: %d", nonzero, groupFirst)
	require.NotZero(t, groupFirst)
	require.Zero(t, r.total.Dropped)
	require.Zero(t, r.total.Skipped)
	require.Greater(t, nonzero, 100)
}
