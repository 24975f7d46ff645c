package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
)

// optimalHits is the exhaustive optimum: at every miss, try bypassing and
// every possible eviction (or a free slot), and keep the best.
func optimalHits(refs []kvindex.Key, counted []bool, capacity int, cache map[kvindex.Key]bool, i int) int {
	if i == len(refs) {
		return 0
	}
	k := refs[i]
	if cache[k] {
		h := 0
		if counted[i] {
			h = 1
		}
		return h + optimalHits(refs, counted, capacity, cache, i+1)
	}
	best := optimalHits(refs, counted, capacity, cache, i+1) // bypass
	if len(cache) < capacity {
		cache[k] = true
		best = max(best, optimalHits(refs, counted, capacity, cache, i+1))
		delete(cache, k)
		return best
	}
	var keys []kvindex.Key
	for v := range cache {
		keys = append(keys, v)
	}
	for _, v := range keys {
		delete(cache, v)
		cache[k] = true
		best = max(best, optimalHits(refs, counted, capacity, cache, i+1))
		delete(cache, k)
		cache[v] = true
	}
	return best
}

// TestBeladyIsOptimal compares beladyHits with the exhaustive optimum on
// random short reference strings, with some references not counted (the
// engine's capped last block, answers' insertions).
func TestBeladyIsOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 300; trial++ {
		n, keys, capacity := 4+r.IntN(9), 2+r.IntN(4), 1+r.IntN(3)
		refs := make([]kvindex.Key, n)
		counted := make([]bool, n)
		for i := range refs {
			refs[i] = kvindex.Key(1 + r.IntN(keys))
			counted[i] = r.IntN(4) != 0
		}
		want := optimalHits(refs, counted, capacity, map[kvindex.Key]bool{}, 0)
		require.Equal(t, want, beladyHits(refs, counted, capacity), "refs %v counted %v capacity %d", refs, counted, capacity)
	}
	// A textbook string: 1 2 3 4 1 2 5 1 2 3 4 5 with 3 frames has 5 hits.
	refs := []kvindex.Key{1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5}
	all := make([]bool, len(refs))
	for i := range all {
		all[i] = true
	}
	require.Equal(t, 5, beladyHits(refs, all, 3))
	require.Zero(t, beladyHits(refs, all, 0))
	require.Equal(t, 7, beladyHits(refs, all, 5), "everything fits: every repeat hits")
	require.Equal(t, 2, pooledLRUHits(refs, all, 3), "LRU on the textbook string")
	require.Equal(t, 7, pooledLRUHits(refs, all, 5))
}

// TestBoundHoldsForEveryPolicy runs every policy on small versions of every
// workload over three seeds: the capacity bound and the LRU-residency
// bound are at least every policy's hit rate, the LRU-residency bound is at
// most the capacity bound, which is at most the infinite-cache ceiling, and
// both bounds are the same for every policy when arrivals are open-loop.
func TestBoundHoldsForEveryPolicy(t *testing.T) {
	tighter := 0
	for _, seed := range []uint64{1, 2, 3} {
		for _, kind := range AllWorkloads {
			cfg := DefaultConfig(kind, 0.75)
			cfg.Seed = seed
			cfg.Fleet.Engines, cfg.Fleet.NumGPUBlocks = 4, 256
			cfg.Workload.Requests, cfg.Workload.Groups, cfg.Workload.OutputTokens = 112, 12, 40
			var bound, lruBound float64
			for _, p := range AllPolicies {
				res, err := Run(cfg, p)
				require.NoError(t, err, "%s/%s", kind, p)
				require.LessOrEqual(t, res.HitRate, res.BoundHitRate+1e-12, "%s/%s: bound %v", kind, p, res.BoundHitRate)
				require.LessOrEqual(t, res.HitRate, res.LRUBoundHitRate+1e-12, "%s/%s seed %d: LRU-residency bound %v (%+v)", kind, p, seed, res.LRUBoundHitRate, res.LRUShape)
				require.LessOrEqual(t, res.LRUBoundHitRate, res.BoundHitRate+1e-12, "%s/%s", kind, p)
				require.LessOrEqual(t, res.BoundHitRate, res.InfiniteHitRate+1e-12, "%s/%s", kind, p)
				require.LessOrEqual(t, res.PooledLRUHitRate, res.BoundHitRate+1e-12, "%s/%s: LRU is no better than MIN", kind, p)
				if res.LRUBoundHitRate < res.BoundHitRate {
					tighter++
				}
				if kind != MultiTurn { // closed-loop turns arrive in a policy-dependent order
					if bound == 0 {
						bound, lruBound = res.BoundHitRate, res.LRUBoundHitRate
					}
					require.Equal(t, bound, res.BoundHitRate, "%s/%s: the bound depends only on the trace", kind, p)
					require.Equal(t, lruBound, res.LRUBoundHitRate, "%s/%s: the LRU-residency bound too", kind, p)
				}
			}
			if kind != NoReuse {
				require.Positive(t, bound+1, kind)
			}
		}
	}
	t.Logf("LRU-residency bound below the capacity bound in %d runs", tighter)
}
