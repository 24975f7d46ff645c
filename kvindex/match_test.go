package kvindex

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

func TestMatchManyCandidatesAndDuplicates(t *testing.T) {
	ix := newTestIndex(t, Config{})
	const n = 150 // three chunks of 64
	prompt := seq(1, 8*testBS)
	var cands []string
	for c := 0; c < n; c++ {
		name := fmt.Sprintf("10.0.%d.%d:8000", c/256, c%256)
		cands = append(cands, name)
		if held := c % 9; held > 0 {
			require.NoError(t, ix.Store(name, storeEv("m", 1, prompt[:held*testBS])))
		}
	}
	cands = append(cands, cands[70], "ghost", cands[3]) // duplicates and an unknown name
	var out MatchResult
	keys := Keys(nil, prompt, testBS, &KeyParams{Model: "m"})
	for round := 0; round < 2; round++ { // the second round uses the cached resolution
		ix.Match(keys, cands, &out)
		require.Len(t, out.Endpoints(), n+3)
		for c := 0; c < n; c++ {
			want := min(c%9, 8)
			require.Equal(t, want, out.Endpoints()[c].Blocks, "candidate %d", c)
			require.Equal(t, want, out.Endpoints()[c].GPU)
			require.Equal(t, float64(want), out.Endpoints()[c].Score)
		}
		require.Equal(t, EndpointMatch{Endpoint: cands[70], Blocks: 7, Score: 7, GPU: 7}, out.Endpoints()[n])
		require.Equal(t, EndpointMatch{Endpoint: "ghost"}, out.Endpoints()[n+1])
		require.Equal(t, EndpointMatch{Endpoint: cands[3], Blocks: 3, Score: 3, GPU: 3}, out.Endpoints()[n+2])
	}
}

func TestMatchResolutionCacheFollowsEndpointChanges(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 2*testBS)
	cands := []string{"a", "b"}
	var out MatchResult
	keys := Keys(nil, prompt, testBS, &KeyParams{Model: "m"})
	ix.Match(keys, cands, &out)
	require.Equal(t, []int{0, 0}, blocksOf(&out))

	// "b" appears after the first Match with the same candidate slice.
	require.NoError(t, ix.Store("b", storeEv("m", 1, prompt)))
	ix.Match(keys, cands, &out)
	require.Equal(t, []int{0, 2}, blocksOf(&out))

	// "b" is cleared and "a" registers: IDs change, the cache must follow.
	ix.Clear("b")
	require.NoError(t, ix.Store("a", storeEv("m", 1, prompt[:testBS])))
	ix.Match(keys, cands, &out)
	require.Equal(t, []int{1, 0}, blocksOf(&out))

	// The caller rewrites its slice in place.
	cands[0], cands[1] = "b", "a"
	ix.Match(keys, cands, &out)
	require.Equal(t, []int{0, 1}, blocksOf(&out))
	require.Equal(t, "b", out.Endpoints()[0].Endpoint)

	// Fewer candidates, then none; no keys; nil result.
	ix.Match(keys, cands[1:], &out)
	require.Equal(t, []int{1}, blocksOf(&out))
	ix.Match(keys, nil, &out)
	require.Empty(t, out.Endpoints())
	ix.Match(nil, cands, &out)
	require.Equal(t, 0, out.Total)
	require.Equal(t, []int{0, 0}, blocksOf(&out))
	ix.Match(keys, cands, nil)
}

func TestMatchTierWeightsAndClasses(t *testing.T) {
	ix := newTestIndex(t, Config{TierWeights: map[string]float64{"cpu": 0.5, "storage": 0.25, "lmcache": 0.1}})
	prompt := seq(1, 5*testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 1, prompt)))
	tier := func(name string, hashes ...uint64) {
		err := ix.Store("a", &StoreEvent{EngineHashes: hashes, BlockSize: testBS, Tier: name, Group: 0})
		require.NoError(t, err)
	}
	tier("cpu", 2, 3)
	tier("storage", 3, 4)
	tier("disk", 4)       // falls back to the storage weight
	tier("lmcache", 5)    // configured
	tier("cpu_pinned", 5) // falls back to the cpu weight
	require.Equal(t, 4, ix.Remove("a", []uint64{2, 3, 4, 5}, "gpu", 0))
	r := match(ix, "m", prompt, "a").Endpoints()[0]
	// block: 0 gpu | 1 cpu | 2 cpu+storage | 3 storage+disk | 4 lmcache+cpu_pinned
	require.Equal(t, 5, r.Blocks)
	require.Equal(t, 1, r.GPU)
	require.Equal(t, 3, r.CPU)
	require.Equal(t, 2, r.Storage)
	require.Equal(t, 1, r.Other)
	require.InDelta(t, 1+0.5+0.5+0.25+0.5, r.Score, 1e-12)
}

func TestMatchCPUTierScoreIsNotTruncated(t *testing.T) {
	// Summing 0.8 ten times in float64 gives 7.999…, which llm-d truncates to 7;
	// the score stays a float and exact for blocks in one tier.
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 10*testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 1, prompt)))
	hashes := make([]uint64, 10)
	for i := range hashes {
		hashes[i] = uint64(1 + i)
	}
	require.NoError(t, ix.Store("a", &StoreEvent{EngineHashes: hashes, BlockSize: testBS, Tier: "cpu", Group: 0}))
	require.Equal(t, 10, ix.Remove("a", hashes, "gpu", 0))
	r := match(ix, "m", prompt, "a").Endpoints()[0]
	require.Equal(t, 10, r.CPU)
	require.InDelta(t, 8.0, r.Score, 1e-9)
}

func TestMatchAllocatesNothingWithMetrics(t *testing.T) {
	ix := newTestIndex(t, Config{}, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry()}})
	prompt := seq(1, 32*testBS)
	var cands []string
	for c := 0; c < 64; c++ {
		name := fmt.Sprintf("ep-%d", c)
		cands = append(cands, name)
		require.NoError(t, ix.Store(name, storeEv("m", 1, prompt[:(1+c%32)*testBS])))
	}
	ix.Speculate("ep-0", Keys(nil, prompt, testBS, &KeyParams{Model: "m"}), 0)
	keys := Keys(nil, prompt, testBS, &KeyParams{Model: "m"})
	var out MatchResult
	ix.Match(keys, cands, &out)
	require.Equal(t, 32, out.Endpoints()[0].Blocks)
	require.Equal(t, 31, out.Endpoints()[0].Speculative)
	allocs := testing.AllocsPerRun(200, func() { ix.Match(keys, cands, &out) })
	require.Zero(t, allocs)
}

// TestMatchFollowsTheFirstStandardHolder checks Match on blocks whose
// member arrays' exact masks start below, at and above the candidates'
// lowest endpoint ID, and as the first standard holder of a block changes
// (it is the mask's base, read from the array on every Match): removals
// that move it up, a holder turning non-standard, holders beyond the
// candidates' window, and the same questions with candidates spanning more
// than 64 IDs (no relative bits).
func TestMatchFollowsTheFirstStandardHolder(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 4*testBS)
	name := func(i int) string { return fmt.Sprintf("ep-%02d", i) }
	for i := 0; i < 80; i++ { // IDs in registration order
		require.NoError(t, ix.Store(name(i), storeEv("m", 1, prompt[:testBS])))
	}
	for i := 0; i < 10; i++ {
		require.NoError(t, ix.Store(name(i), storeEv("m", 1, prompt)))
	}
	for i := 70; i < 76; i++ { // holders of block 1 beyond the window of ep-03 … ep-09
		require.NoError(t, ix.Store(name(i), storeEv("m", 1, prompt[:2*testBS])))
	}
	keys := Keys(nil, prompt, testBS, &KeyParams{Model: "m"})
	var cands []string
	for i := 3; i < 10; i++ {
		cands = append(cands, name(i))
	}
	wide := append(append([]string(nil), cands...), name(72), name(79)) // IDs span more than 64
	check := func(want map[string]int) {
		t.Helper()
		for _, cs := range [][]string{cands, wide} {
			var out MatchResult
			ix.Match(keys, cs, &out)
			for i, e := range out.Endpoints() {
				require.Equal(t, want[cs[i]], e.Blocks, "%s among %d candidates", cs[i], len(cs))
			}
		}
	}
	want := map[string]int{name(72): 2, name(79): 1}
	for i := 3; i < 10; i++ {
		want[name(i)] = 4
	}
	check(want) // every block's first standard holder is ep-00, below the window

	// Block 2 loses ep-00 … ep-03: its first standard holder is ep-04,
	// above the window's base.
	for i := 0; i < 4; i++ {
		require.Equal(t, 1, ix.Remove(name(i), []uint64{3}, "gpu", 0))
	}
	want[name(3)] = 2
	check(want)

	// ep-04 holds block 2 in the CPU tier too (no longer standard there):
	// the first standard holder moves to ep-05.
	require.NoError(t, ix.Store(name(4), &StoreEvent{EngineHashes: []uint64{3}, BlockSize: testBS, Tier: "cpu", Group: 0}))
	check(want)
	var out MatchResult
	ix.Match(keys, cands, &out)
	require.Equal(t, 1, out.At(1).CPU, "ep-04")

	// Block 3 keeps only ep-09, the window's last ID.
	for i := 0; i < 9; i++ {
		ix.Remove(name(i), []uint64{4}, "gpu", 0)
	}
	for i := 4; i < 9; i++ {
		want[name(i)] = 3
	}
	check(want)
}
