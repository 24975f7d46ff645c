package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
)

// tinyTrace builds a shared-prefix reference string: groups of a context
// and users of a question and a deterministic answer (the same group and
// user always get the same answer, as in the simulation), each prompt's
// last block uncounted as the engine caps a hit.
func tinyTrace(r *rand.Rand, requests int) *boundTrace {
	groups, users := 1+r.IntN(4), 1+r.IntN(3)
	ctx, q, a := 1+r.IntN(2), 1+r.IntN(2), 1+r.IntN(2)
	t := &boundTrace{}
	for range requests {
		g, u := r.IntN(groups), r.IntN(users)
		var prompt, answer []kvindex.Key
		for i := range ctx {
			prompt = append(prompt, kvindex.Key(1+g*100+i))
		}
		for i := range q {
			prompt = append(prompt, kvindex.Key(10_000+g*100+u*10+i))
		}
		for i := range a {
			answer = append(answer, kvindex.Key(20_000+g*100+u*10+i))
		}
		id := t.request()
		t.add(prompt, len(prompt)-1, id)
		t.addAnswer(answer, id)
	}
	return t
}

// routedLRUHits serves the trace's requests, each whole, on the engines
// route names, each an LRU cache of perEngine blocks: the idealised fleet
// the LRU-residency bound is proven for.
func routedLRUHits(t *boundTrace, route []int, engines, perEngine int) int {
	caches := make([]*lruCache, engines)
	for i := range caches {
		caches[i] = newLRUCache(perEngine)
	}
	hits := 0
	for i, k := range t.refs {
		if caches[route[t.req[i]]].ref(k) && t.counted[i] {
			hits++
		}
	}
	return hits
}

// TestLRUBoundOverEveryRouting checks the LRU-residency bound against every
// possible routing of short shared-prefix traces over two or three LRU
// engines: no routing beats it, and it is never above Belady's bound. It
// also shows why the pooled LRU cache is no bound: some routing beats it.
func TestLRUBoundOverEveryRouting(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 1))
	tighter, beatsPooled := 0, 0
	for trial := 0; trial < 400; trial++ {
		requests, engines := 6+r.IntN(3), 2+r.IntN(2)
		if engines == 3 {
			requests = 6
		}
		tr := tinyTrace(r, requests)
		s := shapeOf(tr)
		require.True(t, s.wellFormed, "trial %d", trial)
		perEngine := s.maxBlocks + r.IntN(s.maxBlocks)
		bound, _ := lruBoundHits(tr, engines, perEngine)
		belady := beladyHits(tr.refs, tr.counted, engines*perEngine)
		require.LessOrEqual(t, bound, belady, "trial %d", trial)
		if bound < belady {
			tighter++
		}
		best := 0
		route := make([]int, requests)
		for code := 0; ; code++ {
			c := code
			for i := range route {
				route[i], c = c%engines, c/engines
			}
			if c > 0 {
				break
			}
			best = max(best, routedLRUHits(tr, route, engines, perEngine))
		}
		require.LessOrEqual(t, best, bound, "trial %d: refs %v counted %v, %d engines of %d blocks, shape %+v", trial, tr.refs, tr.counted, engines, perEngine, s)
		if best > pooledLRUHits(tr.refs, tr.counted, engines*perEngine) {
			beatsPooled++
		}
	}
	require.Positive(t, tighter, "the bound is below Belady's on some traces")
	require.Positive(t, beatsPooled, "some routing beats one pooled LRU cache")
	t.Logf("bound below Belady on %d of 400 traces; a routing beat the pooled LRU cache on %d", tighter, beatsPooled)
}

// TestPooledLRUIsNoBound is the textbook case: a cycle over one block more
// than one pooled LRU cache holds never hits, while two engines, one given
// as much of the cycle as it holds, hit every repeat there.
func TestPooledLRUIsNoBound(t *testing.T) {
	tr := &boundTrace{}
	for range 4 {
		for b := range 5 {
			id := tr.request()
			tr.add([]kvindex.Key{kvindex.Key(b + 1)}, 1, id)
		}
	}
	require.Zero(t, pooledLRUHits(tr.refs, tr.counted, 4), "a 5-block cycle through a 4-block LRU cache never hits")
	route := make([]int, tr.n)
	for i := range route {
		if i%5 >= 2 {
			route[i] = 1
		}
	}
	require.Equal(t, 6, routedLRUHits(tr, route, 2, 2), "blocks 1-2 on one engine of 2 blocks: their 6 repeats hit")
	bound, s := lruBoundHits(tr, 2, 2)
	require.Equal(t, beladyHits(tr.refs, tr.counted, 4), bound, "no idle blocks: Belady's bound, shape %+v", s)
	require.LessOrEqual(t, 6, bound)
}

// TestShapeOf checks the measured shape: B and u, and the fallback when
// idle blocks do not form classes.
func TestShapeOf(t *testing.T) {
	tr := &boundTrace{}
	a := tr.request()
	tr.add([]kvindex.Key{1, 2, 3}, 2, a) // block 3 is never counted: idle
	tr.addAnswer([]kvindex.Key{4, 5}, a) // answers are not prompt blocks
	b := tr.request()
	tr.add([]kvindex.Key{1, 2, 6}, 2, b)
	s := shapeOf(tr)
	require.Equal(t, lruShape{maxBlocks: 5, minIdle: 1, wellFormed: true}, s)
	require.Equal(t, 2, s.whole(10))
	require.Equal(t, 10-2, s.usefulBlocks(10), "full: two whole classes, one idle block each")
	require.Equal(t, 4, s.usefulBlocks(4), "smaller than one request: no whole class, no reduction")

	// Request c shares idle block 3 with a but holds other blocks: the
	// classes are not well formed and the bound falls back to Belady's.
	c := tr.request()
	tr.add([]kvindex.Key{7, 3}, 1, c)
	s = shapeOf(tr)
	require.False(t, s.wellFormed)
	require.Zero(t, s.minIdle)
	require.Equal(t, 10, s.usefulBlocks(10))
	require.Equal(t, LRUShape{MaxBlocks: 5, Whole: 2, LiveBlocks: 20}, s.export(10, 2))
}

// TestStaticPartitionBeatsPooledLRU shows, on the default shared-prefix
// workload, that one pooled LRU cache as large as the fleet is no bound on
// LRU engines: on kvroute's own reference string at 0.25 (seed 1), routing
// every group to a fixed engine (groups dealt round the fleet in order of
// first appearance), each engine an idealised LRU cache of its 1,024
// blocks, hits more than the pooled cache of 8,192.
func TestStaticPartitionBeatsPooledLRU(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the default shared-prefix workload")
	}
	cfg := DefaultConfig(SharedPrefix, 0.25)
	tr, queries := referenceString(t, cfg, KVRoute)
	first := map[int32]kvindex.Key{}
	for i, k := range tr.refs {
		if _, ok := first[tr.req[i]]; !ok {
			first[tr.req[i]] = k // the group context's first block
		}
	}
	n, per := cfg.Fleet.Engines, cfg.Fleet.NumGPUBlocks
	home := map[kvindex.Key]int{}
	route := make([]int, tr.n)
	for r := range route {
		g := first[int32(r)]
		if _, ok := home[g]; !ok {
			home[g] = len(home) % n
		}
		route[r] = home[g]
	}
	rate := func(hits int) float64 { return float64(hits*cfg.Fleet.BlockSize) / float64(queries) }
	partition := rate(routedLRUHits(tr, route, n, per))
	pooled := rate(pooledLRUHits(tr.refs, tr.counted, n*per))
	belady := rate(beladyHits(tr.refs, tr.counted, n*per))
	t.Logf("static partition over %d LRU engines %.2f %%, pooled LRU %.2f %%, capacity bound %.2f %%", n, partition*100, pooled*100, belady*100)
	// How much of the pooled cache Belady needs: the LRU-residency bound
	// shrinks it to 8,008 blocks, which changes nothing.
	for _, blocks := range []int{8008, 7088, 7000, 6000} {
		t.Logf("Belady over %d blocks: %.2f %%", blocks, rate(beladyHits(tr.refs, tr.counted, blocks))*100)
	}
	bound, s := lruBoundHits(tr, n, per)
	t.Logf("LRU-residency bound %.2f %% (%+v)", rate(bound)*100, s.export(per, n))
	require.Greater(t, partition, pooled)
	require.Less(t, partition, belady)
}

// referenceString runs cfg under policy and returns the run's reference
// string for the bounds and its prompt tokens.
func referenceString(t *testing.T, cfg Config, policy Policy) (*boundTrace, int64) {
	t.Helper()
	d := &diagnostics{}
	_, err := runWith(cfg, policy, d)
	require.NoError(t, err)
	require.NotNil(t, d.bound)
	return d.bound, d.queries
}
