package kvindex

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// Tests of blocks held by several endpoints, and of engine hashes that
// collide across models and endpoints: each endpoint's engine hashes must
// resolve to its own keys whatever the others store.

// sharedFleet stores, on four endpoints, one 3-block prompt under model-x
// (a, b) and model-y (c, d), every endpoint with the same engine hashes
// 0xE1, 0xE2, 0xE3: the collision a fleet-wide engine-hash map gets wrong.
func sharedFleet(t *testing.T, ix *Index) []uint32 {
	t.Helper()
	prompt := seq(1, 3*testBS)
	for _, s := range []struct{ ep, model string }{{"a", "model-x"}, {"c", "model-y"}, {"b", "model-x"}, {"d", "model-y"}} {
		require.NoError(t, ix.Store(s.ep, storeEv(s.model, 0xE1, prompt[:testBS])))
		require.NoError(t, ix.Store(s.ep, withParent(storeEv(s.model, 0xE2, prompt[testBS:]), 0xE1)))
	}
	return prompt
}

func TestSameEngineHashOnTwoRootsAcrossHolders(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := sharedFleet(t, ix)
	require.Equal(t, []int{3, 3, 0, 0}, blocksOf(match(ix, "model-x", prompt, "a", "b", "c", "d")))
	require.Equal(t, []int{0, 0, 3, 3}, blocksOf(match(ix, "model-y", prompt, "a", "b", "c", "d")))
	st := ix.Stats()
	require.Equal(t, 6, st.Blocks)
	require.Equal(t, 12, st.Memberships)

	// One holder's removal leaves the other holder of its model, and the
	// other model, intact.
	require.Equal(t, 2, ix.Remove("a", []uint64{0xE2, 0xE3}, "gpu", 0))
	require.Equal(t, []int{1, 3, 0, 0}, blocksOf(match(ix, "model-x", prompt, "a", "b", "c", "d")))
	require.Equal(t, []int{0, 0, 3, 3}, blocksOf(match(ix, "model-y", prompt, "a", "b", "c", "d")))
	// c removing the same hashes affects only model-y's c.
	require.Equal(t, 2, ix.Remove("c", []uint64{0xE2, 0xE3}, "gpu", 0))
	require.Equal(t, []int{1, 3, 0, 0}, blocksOf(match(ix, "model-x", prompt, "a", "b", "c", "d")))
	require.Equal(t, []int{0, 0, 1, 3}, blocksOf(match(ix, "model-y", prompt, "a", "b", "c", "d")))
	// Each endpoint still chains off its own key for 0xE1.
	next := seq(500, testBS)
	require.NoError(t, ix.Store("a", withParent(storeEv("model-x", 0xF1, next), 0xE1)))
	require.NoError(t, ix.Store("c", withParent(storeEv("model-y", 0xF1, next), 0xE1)))
	px := append(append([]uint32{}, prompt[:testBS]...), next...)
	require.Equal(t, []int{2, 1, 0, 0}, blocksOf(match(ix, "model-x", px, "a", "b", "c", "d")))
	require.Equal(t, []int{0, 0, 2, 1}, blocksOf(match(ix, "model-y", px, "a", "b", "c", "d")))
	// Removing hashes an endpoint never stored changes nothing.
	require.Equal(t, 0, ix.Remove("b", []uint64{0xF1}, "gpu", 0))
	require.Equal(t, 3, match(ix, "model-x", prompt, "b").Endpoints()[0].Blocks)
}

func TestSameEngineHashMappedToDifferentKeysByTwoEndpoints(t *testing.T) {
	ix := newTestIndex(t, Config{})
	pa, pb := seq(1, 2*testBS), seq(100, 2*testBS)
	// Same model, same engine hashes, different content (engines that
	// hash differently, or another tokenisation).
	require.NoError(t, ix.Store("a", storeEv("m", 7, pa)))
	require.NoError(t, ix.Store("b", storeEv("m", 7, pb)))
	require.NoError(t, ix.Store("a", withParent(storeEv("m", 9, seq(40, testBS)), 8)))
	require.NoError(t, ix.Store("b", withParent(storeEv("m", 9, seq(40, testBS)), 8)))
	require.Equal(t, []int{3, 0}, blocksOf(match(ix, "m", append(append([]uint32{}, pa...), seq(40, testBS)...), "a", "b")))
	require.Equal(t, []int{0, 3}, blocksOf(match(ix, "m", append(append([]uint32{}, pb...), seq(40, testBS)...), "a", "b")))
	require.Equal(t, 6, ix.Stats().Blocks)
	// a's removal of 7 leaves b's block 7 alone.
	require.Equal(t, 1, ix.Remove("a", []uint64{7}, "gpu", 0))
	require.Equal(t, []int{0, 2}, blocksOf(match(ix, "m", pb, "a", "b")))
	require.Equal(t, 5, ix.Stats().Memberships)
}

func TestClearOfOneHolderLeavesTheOthers(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := sharedFleet(t, ix)
	require.Equal(t, 3, ix.Clear("b"))
	require.Equal(t, 3, ix.Clear("c"))
	require.Equal(t, []int{3, 0, 0, 0}, blocksOf(match(ix, "model-x", prompt, "a", "b", "c", "d")))
	require.Equal(t, []int{0, 0, 0, 3}, blocksOf(match(ix, "model-y", prompt, "a", "b", "c", "d")))
	st := ix.Stats()
	require.Equal(t, 6, st.Blocks)
	require.Equal(t, 6, st.Memberships)
	require.Equal(t, 2, st.Endpoints)
	require.Equal(t, uint64(6), st.EndpointRemovals)
	// The survivors still resolve their engine hashes; the cleared ones
	// start over.
	require.NoError(t, ix.Store("a", withParent(storeEv("model-x", 0xF1, seq(500, testBS)), 0xE3)))
	require.NoError(t, ix.Store("d", withParent(storeEv("model-y", 0xF1, seq(500, testBS)), 0xE3)))
	require.ErrorIs(t, ix.Store("b", withParent(storeEv("model-x", 0xF1, seq(500, testBS)), 0xE3)), ErrParentMissing)
	// Clearing the last holders empties the index.
	require.Equal(t, 4, ix.Clear("a"))
	require.Equal(t, 4, ix.Clear("d"))
	// (b's rejected store left no trace: no endpoint is registered.)
	require.Equal(t, Stats{EndpointRemovals: 14}, ix.Stats())
}

func TestSnapshotRoundTripOfSharedBlocksAndCollidingHashes(t *testing.T) {
	src := newTestIndex(t, Config{})
	prompt := sharedFleet(t, src)
	require.NoError(t, src.Store("b", &StoreEvent{EngineHashes: []uint64{0xE1}, BlockSize: testBS, Tier: "cpu", Group: 0}))
	require.NoError(t, src.Store("b", storeEv("model-x", 0xE1, prompt[:testBS]))) // a second GPU copy
	want := dumpIndex(src)
	var buf bytes.Buffer
	winfo, err := src.WriteSnapshot(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(12), winfo.Entries)

	dst := newTestIndex(t, Config{})
	_, err = dst.ReadSnapshot(bytes.NewReader(buf.Bytes()), SnapshotReadOptions{})
	require.NoError(t, err)
	require.Equal(t, want, dumpIndex(dst))
	require.Equal(t, withoutEvictions(src.Stats()), withoutEvictions(dst.Stats()))
	for _, model := range []string{"model-x", "model-y"} {
		require.Equal(t, blocksOf(match(src, model, prompt, "a", "b", "c", "d")),
			blocksOf(match(dst, model, prompt, "a", "b", "c", "d")), model)
	}
	// Reference counts and parents survive: b's two GPU copies need two
	// removals, and every endpoint chains off its own model's key.
	for _, ix := range []*Index{src, dst} {
		require.Equal(t, 0, ix.Remove("b", []uint64{0xE1}, "gpu", 0))
		require.Equal(t, 1, ix.Remove("b", []uint64{0xE1}, "gpu", 0))
	}
	mb := match(dst, "model-x", prompt, "b").Endpoints()[0]
	require.Equal(t, match(src, "model-x", prompt, "b").Endpoints()[0], mb)
	require.Equal(t, 3, mb.Blocks) // block 0 still held in cpu
	require.Equal(t, 1, mb.CPU)
	require.Equal(t, 0, dst.Remove("b", []uint64{0xE1}, "gpu", 0))
	next := seq(500, testBS)
	for _, s := range []struct{ ep, model string }{{"a", "model-x"}, {"c", "model-y"}} {
		require.NoError(t, dst.Store(s.ep, withParent(storeEv(s.model, 0xF1, next), 0xE3)))
		full := append(append([]uint32{}, prompt...), next...)
		require.Equal(t, 4, match(dst, s.model, full, s.ep).Endpoints()[0].Blocks, s.ep)
	}
}

// TestMemoryAccountingPerMembership checks the index's heap accounting:
// the block map and the engine-hash tables together stay within a bound
// per membership with one and with four holders per block, and give their
// memory back when the endpoints are cleared.
func TestMemoryAccountingPerMembership(t *testing.T) {
	for _, holders := range []int{1, 4} {
		t.Run(fmt.Sprintf("holders=%d", holders), func(t *testing.T) {
			ix := newTestIndex(t, Config{BlockSize: DefaultBlockSize})
			const memberships, chainBlocks = 1 << 16, 64
			eps := make([]string, 16)
			for i := range eps {
				eps[i] = fmt.Sprintf("10.3.0.%d:8000", i)
			}
			for c := 0; c < memberships/holders/chainBlocks; c++ {
				toks := benchTokens(uint64(c)|1<<58, chainBlocks*DefaultBlockSize)
				for h := 0; h < holders; h++ {
					storeChain(t, ix, eps[(c*holders+h)%len(eps)], benchModel, toks, uint64(c+1)<<20)
				}
			}
			st := ix.Stats()
			require.Equal(t, memberships, st.Memberships)
			require.Equal(t, memberships/holders, st.Blocks)
			eng, private := 0, 0
			ix.eps.Range(func(_ string, ep *endpoint) bool {
				require.Equal(t, memberships/len(eps), ep.eng.Len())
				eng += ep.eng.bytes()
				private += ep.eng.Private()
				return true
			})
			// Each endpoint's pairs are its own with one holder, and all
			// shared (one pool entry per block) with four.
			if holders == 1 {
				require.Equal(t, memberships, private)
				require.Zero(t, ix.pool.Len())
			} else {
				require.Zero(t, private)
				require.Equal(t, memberships/holders, ix.pool.Len())
			}
			// Engine-hash entries: a 4-byte unit and a 4-byte index slot
			// at least 5/16 full, plus three more units per private pair
			// (the first holder's dead units and a chunk at most per
			// endpoint aside); 20 bytes per pair in the pool (its
			// directory and last chunk aside).
			require.LessOrEqual(t, eng, memberships*(4+13)+private*12+len(eps)*(16<<10)+memberships/holders*12)
			require.GreaterOrEqual(t, eng, memberships*4+private*12)
			require.LessOrEqual(t, ix.pool.heapBytes(), ix.pool.Len()*20+(128<<10)+poolChunkSize*20)
			require.LessOrEqual(t, ix.blocks.bytes()/st.Blocks, 32+(8*holders+16)*2)
			for _, ep := range eps {
				ix.Clear(ep)
			}
			require.Equal(t, Stats{EndpointRemovals: uint64(memberships)}, ix.Stats())
			live := 0
			for i := range ix.blocks.shards {
				live += ix.blocks.shards[i].tab.Load().live
			}
			require.Zero(t, live)
		})
	}
}

// poolShared returns the number of shared engine-hash pairs and each
// endpoint's private ones.
func poolShared(ix *Index) (shared int, private map[string]int) {
	private = map[string]int{}
	ix.eps.Range(func(name string, ep *endpoint) bool {
		ep.mu.Lock()
		private[name] = ep.eng.Private()
		ep.mu.Unlock()
		return true
	})
	return ix.pool.Len(), private
}

// Four endpoints of one model storing the same blocks under the same engine
// hashes keep each pair once; one holder's removal, remapping and Clear
// leave the others' mappings, and the pool empties with the last holder.
func TestHoldersOfOnePromptShareEngineHashEntries(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 3*testBS)
	eps := []string{"a", "b", "c", "d"}
	for _, ep := range eps {
		require.NoError(t, ix.Store(ep, storeEv("m", 1, prompt)))
	}
	shared, private := poolShared(ix)
	require.Equal(t, 3, shared)
	require.Equal(t, map[string]int{"a": 0, "b": 0, "c": 0, "d": 0}, private)
	require.Equal(t, recountBytes(ix), ix.Stats().Bytes)
	require.Equal(t, int64(12*(costMembership+costEngEntry)+3*costSharedEntry), ix.Stats().Bytes)

	// a removes block 3, b re-maps hash 1 to other content, c is cleared.
	require.Equal(t, 1, ix.Remove("a", []uint64{3}, "gpu", 0))
	require.NoError(t, ix.Store("b", storeEv("m", 1, seq(900, testBS))))
	require.Equal(t, 3, ix.Clear("c"))
	require.Equal(t, []int{2, 0, 0, 3}, blocksOf(match(ix, "m", prompt, "a", "b", "c", "d")))
	require.Equal(t, 1, match(ix, "m", seq(900, testBS), "b").Endpoints()[0].Blocks)
	// b's re-mapped hash keeps its one-unit slot: its new pair takes a pool
	// entry of its own.
	shared, private = poolShared(ix)
	require.Equal(t, 4, shared)
	require.Equal(t, map[string]int{"a": 0, "b": 0, "d": 0}, private)
	require.Equal(t, recountBytes(ix), ix.Stats().Bytes)

	// Every survivor still chains off its own mapping of hash 2 and 3.
	next := seq(500, testBS)
	full := append(append([]uint32{}, prompt...), next...)
	require.NoError(t, ix.Store("a", withParent(storeEv("m", 10, next), 2)))
	require.ErrorIs(t, ix.Store("a", withParent(storeEv("m", 10, next), 3)), ErrParentMissing)
	require.NoError(t, ix.Store("d", withParent(storeEv("m", 4, next), 3)))
	require.Equal(t, 3, match(ix, "m", append(append([]uint32{}, prompt[:2*testBS]...), next...), "a").Endpoints()[0].Blocks)
	require.Equal(t, 4, match(ix, "m", full, "d").Endpoints()[0].Blocks)
	// b lost block 1 with the re-mapping but still resolves hash 2, whose
	// entry it shares with a and d.
	require.Equal(t, 0, match(ix, "m", prompt, "b").Endpoints()[0].Blocks)
	require.NoError(t, ix.Store("b", withParent(storeEv("m", 10, next), 2)))
	require.Equal(t, recountBytes(ix), ix.Stats().Bytes)
	for _, ep := range []string{"a", "b", "d"} {
		ix.Clear(ep)
	}
	require.Zero(t, ix.pool.Len())
	require.Zero(t, ix.Stats().Bytes)
}

// A snapshot of shared blocks restores them shared.
func TestSnapshotRestoreSharesEngineHashEntries(t *testing.T) {
	src := newTestIndex(t, Config{})
	prompt := sharedFleet(t, src)
	shared, _ := poolShared(src)
	require.Equal(t, 6, shared) // 3 blocks per model, each held by two endpoints
	dst := snapshotCopy(t, src, Config{})
	got, private := poolShared(dst)
	require.Equal(t, shared, got)
	require.Equal(t, map[string]int{"a": 0, "b": 0, "c": 0, "d": 0}, private)
	require.Equal(t, recountBytes(dst), dst.Stats().Bytes)
	require.Equal(t, src.Stats().Bytes, dst.Stats().Bytes)
	require.Equal(t, []int{3, 3, 0, 0}, blocksOf(match(dst, "model-x", prompt, "a", "b", "c", "d")))
}

// An endpoint shares the pair of a holder that stored the same engine hash
// even when the first other holder it sees hashes with another seed.
func TestSharingLooksPastHoldersWithOtherHashes(t *testing.T) {
	ix := newTestIndex(t, Config{})
	blk := seq(1, 2*testBS)
	require.NoError(t, ix.Store("b", storeEv("m", 11, blk))) // lowest ID, other seed
	require.NoError(t, ix.Store("a", storeEv("m", 1, blk)))
	require.NoError(t, ix.Store("c", storeEv("m", 1, blk)))
	shared, private := poolShared(ix)
	require.Equal(t, 2, shared)
	require.Equal(t, map[string]int{"a": 0, "b": 2, "c": 0}, private)
	require.Equal(t, recountBytes(ix), ix.Stats().Bytes)
	require.Equal(t, []int{2, 2, 2}, blocksOf(match(ix, "m", blk, "a", "b", "c")))
}
