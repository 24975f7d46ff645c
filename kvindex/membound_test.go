package kvindex

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// perBlock is the accounted cost of a block stored by one endpoint: its
// membership and its (private) engine-hash entry.
const perBlock = costMembership + costEngEntry + costPrivateEntry

// recountBytes returns the accounted bytes recomputed from every endpoint's
// entries, to check the incremental accounting against.
func recountBytes(ix *Index) int64 {
	var n int64
	ix.eps.Range(func(_ string, ep *endpoint) bool {
		ep.mu.Lock()
		n += int64(ep.members)*costMembership + int64(ep.eng.Len())*costEngEntry +
			int64(ep.eng.Private())*costPrivateEntry +
			int64(len(ep.cx))*costComplex + int64(len(ep.spec))*costSpecEntry
		for _, pairs := range ep.cx {
			n += int64(max(0, cap(pairs)-complexPairs)) * costComplexPair
		}
		ep.mu.Unlock()
		return true
	})
	return n + int64(ix.pool.Len())*costSharedEntry
}

// A flooding endpoint evicts its own oldest blocks: the bound holds after
// every store, the other endpoint's blocks stay matchable, and the
// evictions are counted under reason "memory" on a real registry.
func TestMemoryBoundHoldsUnderAFloodAndSparesOtherEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	maxBytes := int64(2000 * perBlock)
	ix := newTestIndex(t, Config{MaxBytes: maxBytes}, Options{Set: telemetry.Set{Registerer: reg}})
	victim := seq(1_000_000, 100*testBS)
	require.NoError(t, ix.Store("b", storeEv("m", 1, victim)))

	const chains = 1000 // 16,000 blocks, eight times the bound
	chain := func(c int) []uint32 { return seq(1+c*16*testBS, 16*testBS) }
	for c := 0; c < chains; c++ {
		require.NoError(t, ix.Store("a", storeEv("m", uint64(c)<<8, chain(c))))
		st := ix.Stats()
		require.LessOrEqual(t, st.Bytes, maxBytes, "after chain %d", c)
		require.Equal(t, recountBytes(ix), st.Bytes)
	}
	st := ix.Stats()
	require.GreaterOrEqual(t, st.Bytes, maxBytes-maxBytes/1024-16*perBlock, "evicted far more than needed")
	require.Equal(t, 100, ix.EndpointBlocks("b"))
	require.Equal(t, []int{100}, blocksOf(match(ix, "m", victim, "b")))
	kept := ix.EndpointBlocks("a")
	require.Equal(t, uint64(chains*16-kept), st.MemoryEvictions)
	require.Zero(t, st.CapacityEvictions)

	// Oldest first: the evicted chains are a prefix of the store order,
	// the kept ones the newest (one chain may have lost its head).
	matched, firstKept := 0, -1
	for c := 0; c < chains; c++ {
		n := blocksOf(match(ix, "m", chain(c), "a"))[0]
		switch {
		case n == 16 && firstKept < 0:
			firstKept = c
		case firstKept >= 0:
			require.Equal(t, 16, n, "chain %d after the first kept chain %d", c, firstKept)
		default:
			require.Zero(t, n, "chain %d before any kept chain", c)
		}
		matched += n
	}
	require.Greater(t, firstKept, 0)
	require.Equal(t, (chains-firstKept)*16, matched)
	require.Less(t, kept-matched, 16) // the partly evicted chain's tail

	expected := fmt.Sprintf(`
# HELP kvroute_kv_index_bytes Memory accounted by the KV-block index, in bytes (bounded by its maxBytes).
# TYPE kvroute_kv_index_bytes gauge
kvroute_kv_index_bytes %d
# HELP kvroute_kv_index_evictions_total Entries removed by the KV-block index itself, by reason.
# TYPE kvroute_kv_index_evictions_total counter
kvroute_kv_index_evictions_total{reason="capacity"} 0
kvroute_kv_index_evictions_total{reason="endpoint_removed"} 0
kvroute_kv_index_evictions_total{reason="memory"} %d
kvroute_kv_index_evictions_total{reason="speculative_expired"} 0
`, st.Bytes, st.MemoryEvictions)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expected),
		"kvroute_kv_index_bytes", "kvroute_kv_index_evictions_total"))
}

// The largest endpoint evicts its oldest stored block; a block stored again
// after eviction counts from its new store.
func TestMemoryEvictionIsOldestFirst(t *testing.T) {
	ix := newTestIndex(t, Config{MaxBytes: 10 * perBlock})
	block := func(i int) []uint32 { return seq(1+i*testBS, testBS) }
	for i := 0; i < 9; i++ {
		require.NoError(t, ix.Store("a", storeEv("m", uint64(100+i), block(i))))
	}
	require.NoError(t, ix.Store("b", storeEv("m", 1, block(50))))
	require.Equal(t, int64(10*perBlock), ix.Stats().Bytes) // at the bound, not over it
	require.Zero(t, ix.Stats().MemoryEvictions)

	held := func(ep string, blocks ...int) []int {
		var out []int
		for _, i := range blocks {
			out = append(out, blocksOf(match(ix, "m", block(i), ep))[0])
		}
		return out
	}
	require.NoError(t, ix.Store("a", storeEv("m", 109, block(9))))
	require.Equal(t, uint64(1), ix.Stats().MemoryEvictions)
	require.Equal(t, []int{0, 1, 1, 1, 1, 1, 1, 1, 1, 1}, held("a", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9))
	require.Equal(t, []int{1}, held("b", 50))

	// Block 0 stored again is a's newest: the next eviction takes block 1.
	require.NoError(t, ix.Store("a", storeEv("m", 100, block(0))))
	require.Equal(t, []int{1, 0, 1}, held("a", 0, 1, 2))
	require.Equal(t, uint64(2), ix.Stats().MemoryEvictions)
	require.Equal(t, []int{1}, held("b", 50))
	require.Equal(t, int64(10*perBlock), ix.Stats().Bytes)
}

// An endpoint holding only speculative entries is bounded too: when it is
// the largest, its speculation is dropped (counted as "memory"), and its
// confirmed blocks would not be touched by that.
func TestMemoryBoundCoversSpeculativeEntries(t *testing.T) {
	ix := newTestIndex(t, Config{MaxBytes: 40 * perBlock})
	require.NoError(t, ix.Store("a", storeEv("m", 1, seq(1, 4*testBS))))
	keys := Keys(nil, seq(5000, 100*testBS), testBS, &KeyParams{Model: "m"})
	ix.Speculate("c", keys[:10], time.Minute)
	st := ix.Stats()
	require.Equal(t, 10, st.Speculative)
	require.Equal(t, int64(4*perBlock+10*(costMembership+costSpecEntry)), st.Bytes)
	ix.Speculate("c", keys, time.Minute) // 100 entries: beyond the bound
	st = ix.Stats()
	require.Zero(t, st.Speculative)
	require.Equal(t, uint64(100), st.MemoryEvictions) // one per membership (the ten extended ones have two list entries)
	require.Equal(t, int64(4*perBlock), ix.Stats().Bytes)
	require.Equal(t, []int{4}, blocksOf(match(ix, "m", seq(1, 4*testBS), "a")))
}

// Every path that adds or removes entries keeps the accounting exact, and it
// returns to zero when everything is gone: removal, expiry and Clear.
func TestAccountedBytesReturnToZero(t *testing.T) {
	clk := newFakeClock()
	ix := newTestIndex(t, Config{}, Options{Set: telemetry.Set{Clock: clk}})
	prompt := seq(1, 8*testBS)
	fill := func() {
		require.NoError(t, ix.Store("a", storeEv("m", 1, prompt)))
		require.NoError(t, ix.Store("b", storeEv("m", 1, prompt))) // shared blocks
		require.NoError(t, ix.Store("a", storeEv("m", 1, prompt))) // GPU count 2: complex
		require.NoError(t, ix.Store("a", &StoreEvent{EngineHashes: []uint64{1, 2, 3, 4}, BlockSize: testBS, Tier: "cpu", Group: 0}))
		ev := storeEv("m", 1, prompt[:2*testBS])
		ev.Group = 7 // a second group: complex
		require.NoError(t, ix.Store("b", ev))
		ix.Speculate("c", Keys(nil, seq(900, 5*testBS), testBS, &KeyParams{Model: "m"}), time.Second)
		ix.Speculate("a", Keys(nil, prompt, testBS, &KeyParams{Model: "m"}), time.Second) // confirmed: no-op
		st := ix.Stats()
		require.Equal(t, recountBytes(ix), st.Bytes)
		// a's and b's 8 entries each are the same pairs: 8 shared ones.
		require.Equal(t, int64(st.Memberships)*costMembership+16*costEngEntry+8*costSharedEntry+10*costComplex+5*costSpecEntry, st.Bytes)
	}
	fill()
	// Remove everything store by store, and let the speculation expire.
	require.Equal(t, 0, ix.Remove("a", []uint64{1, 2, 3, 4, 5, 6, 7, 8}, "gpu", 0)) // count 2 → 1
	require.Equal(t, 4, ix.Remove("a", []uint64{1, 2, 3, 4}, "cpu", 0))
	require.Equal(t, 8, ix.Remove("a", []uint64{1, 2, 3, 4, 5, 6, 7, 8}, "gpu", 0))
	require.Equal(t, 8, ix.Remove("b", []uint64{1, 2, 3, 4, 5, 6, 7, 8}, "gpu", 0))
	require.Equal(t, 2, ix.Remove("b", []uint64{1, 2}, "gpu", 7))
	clk.Advance(2 * time.Second)
	require.Equal(t, 5, ix.Sweep())
	st := ix.Stats()
	require.Zero(t, st.Memberships)
	require.Zero(t, st.Bytes)

	fill()
	for _, ep := range []string{"a", "b", "c"} {
		ix.Clear(ep)
	}
	require.Equal(t, Stats{EndpointRemovals: st.EndpointRemovals + 8 + 8 + 5, SpeculativeExpiries: 5}, ix.Stats())
}

// The accounted bytes follow the heap the index actually takes, within 25 %,
// for blocks held by one endpoint and by four (measured once, with the
// garbage collector run before each reading).
func TestAccountedBytesTrackHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 2^17 memberships")
	}
	for _, holders := range []int{1, 4} {
		t.Run(fmt.Sprintf("holders=%d", holders), func(t *testing.T) {
			const eps, memberships, chainBlocks = 64, 1 << 17, 256
			names := make([]string, eps)
			for i := range names {
				names[i] = fmt.Sprintf("10.3.%d.%d:8000", i/16, i%16)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			ix, err := New(Config{SweepInterval: -1}, Options{})
			require.NoError(t, err)
			for c := 0; c < memberships/holders/chainBlocks; c++ {
				toks := benchTokens(uint64(c)|1<<58, chainBlocks*DefaultBlockSize)
				for h := 0; h < holders; h++ {
					storeChain(t, ix, names[(c*holders+h)%eps], benchModel, toks, uint64(c+1)<<20)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			heap := float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
			st := ix.Stats()
			require.Equal(t, memberships, st.Memberships)
			ratio := float64(st.Bytes) / heap
			t.Logf("accounted %d B, heap %.0f B (%.1f B/membership): ratio %.3f", st.Bytes, heap, heap/memberships, ratio)
			require.InDelta(t, 1, ratio, 0.25)
			runtime.KeepAlive(ix)
		})
	}
}

// Concurrent writers for several endpoints, one of them flooding, leave the
// index within its bound with exact accounting (run with -race).
func TestMemoryBoundUnderConcurrentWriters(t *testing.T) {
	maxBytes := int64(8000 * perBlock)
	ix := newTestIndex(t, Config{MaxBytes: maxBytes})
	done := make(chan struct{})
	for w := 0; w < 4; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			name, n := fmt.Sprintf("e%d", w), 100
			if w == 0 {
				n = 1000 // the flooder: 16,000 blocks
			}
			for c := 0; c < n; c++ {
				if err := ix.Store(name, storeEv("m", uint64(c)<<8, seq(1+(w<<20)+c*16*testBS, 16*testBS))); err != nil {
					t.Error(err)
					return
				}
				if c%8 == 0 {
					ix.Speculate(name, Keys(nil, seq(1<<24+w<<20+c, 2*testBS), testBS, &KeyParams{Model: "m"}), time.Minute)
				}
			}
		}()
	}
	for w := 0; w < 4; w++ {
		<-done
	}
	st := ix.Stats()
	require.LessOrEqual(t, st.Bytes, maxBytes)
	require.Equal(t, recountBytes(ix), st.Bytes)
	require.NotZero(t, st.MemoryEvictions)
	for w := 1; w < 4; w++ {
		require.Equal(t, 1600, ix.EndpointBlocks(fmt.Sprintf("e%d", w)), "endpoint e%d lost blocks to e0's flood", w)
	}
}

// A snapshot restores the accounted bytes of what it holds, and a restore
// beyond the bound is cut back to it like stores are.
func TestSnapshotRestoreIsAccounted(t *testing.T) {
	src := newTestIndex(t, Config{})
	prompt := seq(1, 8*testBS)
	require.NoError(t, src.Store("a", storeEv("m", 1, prompt)))
	require.NoError(t, src.Store("a", storeEv("m", 1, prompt))) // complex
	require.NoError(t, src.Store("b", storeEv("m", 1, prompt)))
	for c := 0; c < 20; c++ {
		require.NoError(t, src.Store("b", storeEv("m", uint64(c+1)<<8, seq(1000+c*4*testBS, 4*testBS))))
	}
	var buf bytes.Buffer
	_, err := src.WriteSnapshot(&buf)
	require.NoError(t, err)

	dst := newTestIndex(t, Config{})
	_, err = dst.ReadSnapshot(bytes.NewReader(buf.Bytes()), SnapshotReadOptions{})
	require.NoError(t, err)
	require.Equal(t, src.Stats().Bytes, dst.Stats().Bytes)
	require.Equal(t, recountBytes(dst), dst.Stats().Bytes)

	small := newTestIndex(t, Config{MaxBytes: 50 * perBlock})
	_, err = small.ReadSnapshot(bytes.NewReader(buf.Bytes()), SnapshotReadOptions{})
	require.NoError(t, err)
	st := small.Stats()
	require.LessOrEqual(t, st.Bytes, int64(50*perBlock))
	require.NotZero(t, st.MemoryEvictions)
	require.Equal(t, []int{8}, blocksOf(match(small, "m", prompt, "a"))) // b, the largest, was cut
}

// Speculation goes before confirmed blocks: a flood of speculative entries
// naming an endpoint (a broken peer replica's decisions, through package
// cluster) takes the index over its bound, and the endpoint loses those
// guesses, not the blocks its engine reported.
func TestMemoryEvictionDropsSpeculationBeforeConfirmedBlocks(t *testing.T) {
	ix := newTestIndex(t, Config{MaxBytes: 40 * perBlock})
	confirmed := seq(1, 30*testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 1, confirmed)))
	require.NoError(t, ix.Store("b", storeEv("m", 2, seq(900_000, 2*testBS))))
	keys := Keys(nil, seq(5000, 100*testBS), testBS, &KeyParams{Model: "m"})
	for i := 0; i < len(keys); i += 5 {
		ix.Speculate("a", keys[i:i+5], time.Minute)
		require.LessOrEqual(t, ix.Stats().Bytes, int64(40*perBlock), "after %d entries", i+5)
		require.Equal(t, []int{30}, blocksOf(match(ix, "m", confirmed, "a")), "after %d speculative entries", i+5)
	}
	require.Equal(t, 30, ix.EndpointBlocks("a"))
	require.Equal(t, []int{2}, blocksOf(match(ix, "m", seq(900_000, 2*testBS), "b")))
	st := ix.Stats()
	require.Equal(t, recountBytes(ix), st.Bytes)
	require.NotZero(t, st.MemoryEvictions)
}

// Memberships held in many (tier, group) pairs are accounted by their
// pairs: a complex membership was charged a flat costComplex whatever its
// pairs, so a publisher announcing its blocks under a hundred group
// indices held about 13 times the bytes it was charged (25 times under
// 200), and Config.MaxBytes bounded a small part of the index's memory.
func TestAccountedBytesTrackHeapOfManyGroups(t *testing.T) {
	const blocks, groups = 256, 100
	toks := seq(1, blocks*testBS)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ix, err := New(Config{BlockSize: testBS, SweepInterval: -1}, Options{})
	require.NoError(t, err)
	for g := 0; g < groups; g++ {
		ev := storeEv("m", 1, toks)
		ev.Group = g
		require.NoError(t, ix.Store("a", ev))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
	st := ix.Stats()
	require.Equal(t, recountBytes(ix), st.Bytes)
	ratio := float64(st.Bytes) / heap
	t.Logf("accounted %d B, heap %.0f B: ratio %.3f", st.Bytes, heap, ratio)
	require.InDelta(t, 1, ratio, 0.25)
	runtime.KeepAlive(ix)

	for g := 0; g < groups; g++ {
		require.Equal(t, blocks, ix.Remove("a", groupHashes(1, blocks), "gpu", g))
	}
	require.Zero(t, ix.Stats().Bytes)
}
