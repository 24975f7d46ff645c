package kvindex

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// Tests of the exactness of engine-hash resolution when endpoints share
// blocks: an endpoint resolves an engine hash (as a parent, in a removal or
// in a tier-only store) only through a mapping it stored itself. Knowing
// that some endpoint maps the hash to a key, and that the endpoint holds
// that key, is not enough: the cases below hold the key under another hash.
// They pass with per-endpoint engine-hash tables and are the bar for any
// table shared across endpoints.

// snapshotCopy returns a new index restored from a snapshot of src, after
// checking that it holds exactly what src holds.
func snapshotCopy(t *testing.T, src *Index, cfg Config) *Index {
	t.Helper()
	var buf bytes.Buffer
	_, err := src.WriteSnapshot(&buf)
	require.NoError(t, err)
	dst := newTestIndex(t, cfg)
	_, err = dst.ReadSnapshot(bytes.NewReader(buf.Bytes()), SnapshotReadOptions{})
	require.NoError(t, err)
	require.Equal(t, dumpIndex(src), dumpIndex(dst))
	require.Equal(t, withoutEvictions(src.Stats()), withoutEvictions(dst.Stats()))
	return dst
}

// A hostile endpoint x announces, under a hash the honest endpoint a uses
// for a block whose store the index never saw, the tokens of a block a
// holds under another hash. a's events naming that hash must still resolve
// to nothing: chaining a's next blocks off x's claim would index wrong keys.
func TestClaimOfAnotherEndpointsUnseenHashResolvesNothingForIt(t *testing.T) {
	ix := newTestIndex(t, Config{})
	pb := seq(1, testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 0xB0, pb))) // a holds B under 0xB0
	// a's engine also stored 0xA1 (other tokens); that event was lost.
	require.NoError(t, ix.Store("x", storeEv("m", 0xA1, pb))) // x claims 0xA1 → B's key
	require.Equal(t, []int{1, 1}, blocksOf(match(ix, "m", pb, "a", "x")))

	for _, ix := range []*Index{ix, snapshotCopy(t, ix, Config{})} {
		before := ix.Stats()
		next := seq(500, testBS)
		require.ErrorIs(t, ix.Store("a", withParent(storeEv("m", 0xA2, next), 0xA1)), ErrParentMissing)
		require.ErrorIs(t, ix.Store("a", &StoreEvent{EngineHashes: []uint64{0xA1}, BlockSize: testBS, Tier: "cpu", Group: 0}), ErrUnknownHash)
		require.Equal(t, 0, ix.Remove("a", []uint64{0xA1}, "gpu", 0))
		require.Equal(t, before, ix.Stats())
		require.Equal(t, []int{1, 1}, blocksOf(match(ix, "m", pb, "a", "x")))

		// x's own chain off its claim is x's business: it chains off B's key.
		require.NoError(t, ix.Store("x", withParent(storeEv("m", 0xA2, next), 0xA1)))
		full := append(append([]uint32{}, pb...), next...)
		require.Equal(t, []int{1, 2}, blocksOf(match(ix, "m", full, "a", "x")))
		// And x's removal of the claimed hash leaves a's block B alone.
		require.Equal(t, 1, ix.Remove("x", []uint64{0xA1}, "gpu", 0))
		require.Equal(t, []int{1, 0}, blocksOf(match(ix, "m", full, "a", "x")))
	}
}

// Engines that hash with different seeds publish different engine hashes
// for the same blocks of one model: the blocks are shared in the block map,
// but each endpoint resolves only its own hashes.
func TestEnginesWithDifferentHashSeedsResolveOnlyTheirOwnHashes(t *testing.T) {
	ix := newTestIndex(t, Config{MaxBlocksPerEndpoint: 4})
	prompt := seq(1, 3*testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 1, prompt)))
	require.NoError(t, ix.Store("b", storeEv("m", 11, prompt)))
	require.Equal(t, 3, ix.Stats().Blocks)

	for _, ix := range []*Index{ix, snapshotCopy(t, ix, Config{MaxBlocksPerEndpoint: 4})} {
		require.Equal(t, []int{3, 3}, blocksOf(match(ix, "m", prompt, "a", "b")))
		require.Equal(t, 0, ix.Remove("a", []uint64{11, 12, 13}, "gpu", 0))
		require.Equal(t, 0, ix.Remove("b", []uint64{1, 2, 3}, "gpu", 0))
		require.Equal(t, 6, ix.Stats().Memberships)
		require.ErrorIs(t, ix.Store("a", withParent(storeEv("m", 4, seq(90, testBS)), 13)), ErrParentMissing)
		require.ErrorIs(t, ix.Store("b", withParent(storeEv("m", 14, seq(90, testBS)), 3)), ErrParentMissing)

		// a's removal of its last block leaves b's copy.
		require.Equal(t, 1, ix.Remove("a", []uint64{3}, "gpu", 0))
		require.Equal(t, []int{2, 3}, blocksOf(match(ix, "m", prompt, "a", "b")))
		// a's capacity eviction takes a's oldest block only: a holds 1, 2
		// and then 4, 5, 6 (5 > 4), so block 1 of the prompt goes for a.
		require.NoError(t, ix.Store("a", storeEv("m", 4, seq(200, 3*testBS))))
		require.Equal(t, []int{0, 3}, blocksOf(match(ix, "m", prompt, "a", "b")))
		// Clearing b leaves a's mappings: a still chains off its hash 2.
		require.Equal(t, 3, ix.Clear("b"))
		require.NoError(t, ix.Store("a", withParent(storeEv("m", 7, seq(300, testBS)), 2)))
		require.ErrorIs(t, ix.Store("a", withParent(storeEv("m", 8, seq(300, testBS)), 12)), ErrParentMissing)
		require.Equal(t, 0, ix.Clear("b"))
	}
}

// One endpoint may announce one block under two engine hashes (the engine
// hashes something the router key does not carry): the two stores count as
// two references, each hash resolves on its own, and another endpoint
// holding the block under one of those hashes is unaffected by either.
func TestOneEndpointAnnouncingABlockUnderTwoHashes(t *testing.T) {
	ix := newTestIndex(t, Config{})
	blk := seq(1, testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 1, blk)))
	require.NoError(t, ix.Store("a", storeEv("m", 2, blk)))
	require.NoError(t, ix.Store("b", storeEv("m", 1, blk)))
	st := ix.Stats()
	require.Equal(t, 1, st.Blocks)
	require.Equal(t, 2, st.Memberships)

	for _, ix := range []*Index{ix, snapshotCopy(t, ix, Config{})} {
		next := seq(100, testBS)
		full := append(append([]uint32{}, blk...), next...)
		// Both of a's hashes are parents of the same key.
		require.NoError(t, ix.Store("a", withParent(storeEv("m", 3, next), 1)))
		require.NoError(t, ix.Store("a", withParent(storeEv("m", 4, next), 2)))
		require.Equal(t, []int{2, 1}, blocksOf(match(ix, "m", full, "a", "b")))
		// The first removal leaves one of a's two references.
		require.Equal(t, 0, ix.Remove("a", []uint64{1}, "gpu", 0))
		require.Equal(t, []int{2, 1}, blocksOf(match(ix, "m", full, "a", "b")))
		require.Equal(t, 1, ix.Remove("a", []uint64{2}, "gpu", 0))
		require.Equal(t, []int{0, 1}, blocksOf(match(ix, "m", full, "a", "b")))
		// b's mapping of hash 1 is untouched by all of a's.
		require.NoError(t, ix.Store("b", withParent(storeEv("m", 5, next), 1)))
		require.Equal(t, []int{0, 2}, blocksOf(match(ix, "m", full, "a", "b")))
		require.Equal(t, 1, ix.Remove("b", []uint64{1}, "gpu", 0))
		require.Equal(t, []int{0, 0}, blocksOf(match(ix, "m", full, "a", "b")))
	}
}
