package kvindex

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// recountGroupBytes returns the accounted bytes of every endpoint's groups
// recomputed from their entries.
func recountGroupBytes(ix *Index) int64 {
	var n int64
	ix.hybrid.Range(func(_ string, hy *hybridEP) bool {
		hy.mu.RLock()
		for _, g := range hy.groups {
			n += int64(len(g.byHash))*costGroupHash + int64(len(g.held))*costGroupKey
		}
		hy.mu.RUnlock()
		return true
	})
	return n
}

// groupHashes returns n engine hashes from h.
func groupHashes(h uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = h + uint64(i)
	}
	return out
}

// A group's entries count in the index's accounted bytes as they are
// stored, removed and cleared.
func TestGroupBytesAreAccounted(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 8*testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 1, prompt)))
	base := ix.Stats().Bytes
	require.Equal(t, recountBytes(ix), base)

	_, err := ix.StoreGroup("a", &GroupStore{Group: 1, Kind: GroupSlidingWindow, Window: 2 * testBS, Hashes: groupHashes(1, 8)})
	require.NoError(t, err)
	_, err = ix.StoreGroup("a", &GroupStore{Group: 2, Kind: GroupMamba, Hashes: groupHashes(5, 4)})
	require.NoError(t, err)
	per := int64(costGroupHash + costGroupKey)
	require.Equal(t, base+12*per, ix.Stats().Bytes)
	require.Equal(t, recountBytes(ix)+recountGroupBytes(ix), ix.Stats().Bytes)

	_, err = ix.StoreGroup("a", &GroupStore{Group: 2, Kind: GroupMamba, Hashes: groupHashes(5, 4)}) // stored twice: no new entries
	require.NoError(t, err)
	require.Equal(t, base+12*per, ix.Stats().Bytes)
	require.Equal(t, 3, ix.RemoveGroup("a", 1, groupHashes(1, 3)))
	require.Equal(t, base+9*per, ix.Stats().Bytes)

	ix.Clear("a")
	require.Zero(t, ix.Stats().Bytes)
}

// Under Config.MaxBytes the groups' entries are evicted like the rest: a
// hybrid endpoint whose groups push the index over the bound evicts its
// oldest full-attention blocks together with their group entries, the
// bound holds after every store, and the other endpoint keeps its blocks.
func TestGroupBytesBoundedByMaxBytes(t *testing.T) {
	const blocks = 64
	quiet := seq(100_000, 16*testBS)
	maxBytes := int64(2 * blocks * (perBlock + 2*(costGroupHash+costGroupKey)))
	ix := newTestIndex(t, Config{MaxBytes: maxBytes})
	require.NoError(t, ix.Store("quiet", storeEv("m", 1<<40, quiet)))
	for c := range 8 { // 8 chains of 64 blocks, each with two groups
		toks := seq(c*blocks*testBS+1, blocks*testBS)
		h := uint64(c+1) << 20
		require.NoError(t, ix.Store("hy", storeEv("m", h, toks)))
		_, err := ix.StoreGroup("hy", &GroupStore{Group: 1, Kind: GroupSlidingWindow, Window: 4 * testBS, Hashes: groupHashes(h, blocks)})
		require.NoError(t, err)
		_, err = ix.StoreGroup("hy", &GroupStore{Group: 2, Kind: GroupMamba, Hashes: groupHashes(h, blocks)})
		require.NoError(t, err)
		st := ix.Stats()
		require.LessOrEqual(t, st.Bytes, maxBytes, "chain %d", c)
		require.Equal(t, recountBytes(ix)+recountGroupBytes(ix), st.Bytes)
	}
	require.Positive(t, ix.Stats().MemoryEvictions)
	require.Equal(t, 16, blocksOf(match(ix, "m", quiet, "quiet"))[0], "the other endpoint keeps its blocks")
	// The newest chain is whole and usable; the oldest is gone, with its
	// group entries (the groups hold no more blocks than the block map).
	last := seq(7*blocks*testBS+1, blocks*testBS)
	require.Equal(t, blocks, blocksOf(match(ix, "m", last, "hy"))[0])
	require.Zero(t, blocksOf(match(ix, "m", seq(1, blocks*testBS), "hy"))[0])
	hy, _ := ix.hybrid.Load("hy")
	for _, g := range hy.groups {
		require.LessOrEqual(t, len(g.byHash), ix.EndpointBlocks("hy"))
	}
}

// The accounted bytes of group entries follow the heap they take, within
// 25 % (measured once, with the garbage collector run before each reading).
func TestGroupBytesTrackHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 2^17 group entries")
	}
	const entries, groups = 1 << 17, 2
	ix := newTestIndex(t, Config{})
	toks := seq(1, entries/groups*testBS)
	storeChain(t, ix, "a", "m", toks, 1<<30)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b0 := ix.Stats().Bytes
	for first := 0; first < entries/groups; first += 1024 {
		hs := groupHashes(1<<30+uint64(first), 1024)
		_, err := ix.StoreGroup("a", &GroupStore{Group: 1, Kind: GroupSlidingWindow, Window: 64, Hashes: hs})
		require.NoError(t, err)
		_, err = ix.StoreGroup("a", &GroupStore{Group: 2, Kind: GroupMamba, Hashes: hs})
		require.NoError(t, err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
	acc := float64(ix.Stats().Bytes - b0)
	t.Logf("group entries: accounted %.0f B, heap %.0f B (%.1f B/entry): ratio %.3f", acc, heap, heap/entries, acc/heap)
	require.InDelta(t, 1, acc/heap, 0.25, fmt.Sprintf("heap %.1f B per entry", heap/entries))
	runtime.KeepAlive(ix)
}
