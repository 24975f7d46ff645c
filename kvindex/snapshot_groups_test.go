package kvindex

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// hybridSnapIndex fills ix with a hybrid endpoint (a full-attention chain,
// a sliding-window group holding only its last blocks, a Mamba group with
// a block stored twice) beside a plain one, and returns the prompt.
func hybridSnapIndex(t *testing.T, ix *Index) []uint32 {
	t.Helper()
	prompt := seq(1, 12*testBS)
	require.NoError(t, ix.Store("hy:1", storeEv("m", 100, prompt)))
	require.NoError(t, ix.Store("plain:1", storeEv("m", 500, prompt)))
	_, err := ix.StoreGroup("hy:1", &GroupStore{Group: 1, Kind: GroupSlidingWindow, Window: 2*testBS + 1, Hashes: groupHashes(106, 4)})
	require.NoError(t, err)
	_, err = ix.StoreGroup("hy:1", &GroupStore{Group: 2, Kind: GroupMamba, Hashes: []uint64{104, 108, 108}})
	require.NoError(t, err)
	pl := LockPositionForTest(ix, "hy:1")
	pl.Set([]byte("at 7"))
	pl.Unlock()
	return prompt
}

// Groups survive a snapshot (a checkpoint file, a peer's bootstrap): the
// restored index has the same groups, kinds, windows, entries and store
// counts, answers Match with the same usable prefixes, and accounts the
// same bytes.
func TestSnapshotRoundTripsGroups(t *testing.T) {
	src := newTestIndex(t, Config{})
	prompt := hybridSnapIndex(t, src)
	var buf bytes.Buffer
	info, err := src.WriteSnapshot(&buf)
	require.NoError(t, err)
	require.Equal(t, SnapshotFormatVersion, info.FormatVersion)
	require.Equal(t, 2, info.Endpoints[0].Groups)
	require.Equal(t, 4+2, info.Endpoints[0].GroupEntries)

	dst := newTestIndex(t, Config{})
	rinfo, err := dst.ReadSnapshot(bytes.NewReader(buf.Bytes()), SnapshotReadOptions{})
	require.NoError(t, err)
	require.Equal(t, info.Endpoints, rinfo.Endpoints)
	require.Equal(t, dumpIndex(src), dumpIndex(dst))
	require.NotEmpty(t, dumpGroups(dst, "hy:1"))
	for n := 1; n <= 12; n++ {
		toks := prompt[:n*testBS]
		require.Equal(t, blocksOf(match(src, "m", toks, "hy:1", "plain:1")), blocksOf(match(dst, "m", toks, "hy:1", "plain:1")), "%d blocks", n)
	}
	require.Equal(t, []int{9, 12}, blocksOf(match(dst, "m", prompt, "hy:1", "plain:1")), "the groups limit the hybrid endpoint")
	require.Equal(t, src.Stats().Bytes, dst.Stats().Bytes)
	require.Equal(t, recountBytes(dst)+recountGroupBytes(dst), dst.Stats().Bytes)

	// Written again, the restored index gives the same bytes.
	var again bytes.Buffer
	_, err = dst.WriteSnapshot(&again)
	require.NoError(t, err)
	require.Equal(t, buf.Bytes(), again.Bytes())

	// Group removals after the restore resolve against the restored hashes.
	require.Equal(t, 1, dst.RemoveGroup("hy:1", 2, []uint64{104}))
	require.Equal(t, 0, dst.RemoveGroup("hy:1", 2, []uint64{108}), "stored twice: one removal leaves it held")
	require.Equal(t, 1, dst.RemoveGroup("hy:1", 2, []uint64{108}))
}

// A version-1 snapshot (an older router's checkpoint, without the groups
// part) still loads.
func TestSnapshotReadsVersion1(t *testing.T) {
	v1 := forgeSectionV(body(uv(3), []byte("a:1"), uv(4), []byte("pos"), uv(1), uv(3), []byte("gpu"),
		uv(1), u64(7), u64(9), uv(1), []byte{0}, uv(1), uv(1)), 1, 1, snapFormatV1)
	ix := newTestIndex(t, Config{})
	info, err := ix.ReadSnapshot(bytes.NewReader(v1), SnapshotReadOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, info.FormatVersion)
	require.Equal(t, int64(1), info.Entries)
	require.Zero(t, info.Endpoints[0].Groups)
	// The same body read as version 2 lacks its groups part.
	requireRefused(t, forgeSectionV(body(uv(3), []byte("a:1"), uv(4), []byte("pos"), uv(1), uv(3), []byte("gpu"),
		uv(1), u64(7), u64(9), uv(1), []byte{0}, uv(1), uv(1)), 1, 1, SnapshotFormatVersion), ErrSnapshotMalformed)
}

// Malformed groups parts are refused whole, leaving nothing behind.
func TestSnapshotRefusesBadGroups(t *testing.T) {
	head := body(uv(3), []byte("a:1"), uv(0), uv(1), uv(3), []byte("gpu"),
		uv(1), u64(7), u64(9), uv(1), []byte{0}, uv(1), uv(1))
	group := func(index uint64, kind byte, window uint64, entries ...[]byte) []byte {
		return body(append([][]byte{uv(index), {kind}, uv(window), uv(uint64(len(entries)))}, entries...)...)
	}
	ent := func(h, key, n uint64) []byte { return body(u64(h), u64(key), uv(n)) }
	ok := body(head, uv(2), group(1, 1, 9, ent(7, 9, 1)), group(2, 2, 0, ent(7, 9, 2)))
	ix := newTestIndex(t, Config{})
	_, err := ix.ReadSnapshot(bytes.NewReader(forgeSectionV(ok, 1, 1, SnapshotFormatVersion)), SnapshotReadOptions{})
	require.NoError(t, err)
	require.Len(t, dumpGroups(ix, "a:1"), 4)

	for name, b := range map[string][]byte{
		"unknown kind":         body(head, uv(1), group(1, 3, 0)),
		"window zero":          body(head, uv(1), group(1, 1, 0)),
		"mamba with window":    body(head, uv(1), group(1, 2, 4)),
		"group twice":          body(head, uv(2), group(1, 2, 0), group(1, 2, 0)),
		"zero key":             body(head, uv(1), group(1, 2, 0, ent(7, 0, 1))),
		"zero count":           body(head, uv(1), group(1, 2, 0, ent(7, 9, 0))),
		"too many groups":      body(head, uv(maxGroupsTracked+1)),
		"group index beyond":   body(head, uv(1), group(maxGroupIndex+1, 2, 0)), // events could never remove it
		"entries beyond input": body(head, uv(1), body(uv(1), []byte{2}, uv(0), uv(50))),
		"missing groups part":  head,
		"bytes after groups":   body(ok, []byte{0}),
	} {
		t.Run(name, func(t *testing.T) {
			requireRefused(t, forgeSectionV(b, 1, 1, SnapshotFormatVersion), ErrSnapshotMalformed)
		})
	}
	big := newTestIndex(t, Config{MaxBlocksPerEndpoint: 1})
	_, err = big.ReadSnapshot(bytes.NewReader(forgeSectionV(body(head, uv(1), group(1, 2, 0, ent(7, 9, 1), ent(8, 9, 1))), 1, 1,
		SnapshotFormatVersion)), SnapshotReadOptions{})
	require.ErrorIs(t, err, ErrSnapshotTooLarge)
}

// Store takes cache group indices up to maxGroupIndex (254) only, so every
// membership it builds fits a snapshot: the reader bounds a membership at
// 8 tiers in 256 groups, and Store took any group index up to 2^31−1, so
// one block a publisher stored under thousands of group indices made every
// snapshot of the index (checkpoint, peer bootstrap) fail to load as a
// whole. StoreGroup and RemoveGroup take the same indices (they read the
// index as an int32, so one beyond it named another group).
func TestEveryStoredGroupFitsASnapshot(t *testing.T) {
	ix := newTestIndex(t, Config{})
	toks := seq(1, testBS)
	for g := -1; g < 2100; g++ {
		for _, tier := range []string{"gpu", "cpu", "t2", "t3", "t4", "t5", "t6", "t7"} {
			ev := storeEv("m", 1, toks)
			ev.Group, ev.Tier = g, tier
			err := ix.Store("a", ev)
			if g <= maxGroupIndex {
				require.NoError(t, err, "group %d", g)
				continue
			}
			require.ErrorIs(t, err, ErrMalformed, "group %d", g)
		}
	}
	require.Equal(t, 0, ix.Remove("a", []uint64{1}, "gpu", maxGroupIndex+1))
	// The non-prefix groups alike (an index beyond int32 named group 1).
	_, err := ix.StoreGroup("a", &GroupStore{Group: 1<<32 + 1, Kind: GroupMamba, Hashes: []uint64{1}})
	require.ErrorIs(t, err, ErrMalformed)
	_, err = ix.StoreGroup("a", &GroupStore{Group: maxGroupIndex, Kind: GroupMamba, Hashes: []uint64{1}})
	require.NoError(t, err)
	require.Equal(t, 0, ix.RemoveGroup("a", 1<<32+maxGroupIndex, []uint64{1}))
	snapshotCopy(t, ix, Config{})
}

// A group's store counts stop at the count a snapshot reader accepts
// (maxSnapshotCount), as a membership's do (addPair): StoreGroup added one
// per store without a bound, so a hash an engine announced more than 2^31
// times without a removal (vLLM's "full" report mode re-announces reused
// blocks) made every snapshot of the index (checkpoint, peer bootstrap)
// fail to load as a whole, and at 2^32 the count wrapped to 0.
func TestGroupStoreCountsFitASnapshot(t *testing.T) {
	ix := newTestIndex(t, Config{})
	require.NoError(t, ix.Store("a", storeEv("m", 1, seq(1, 2*testBS))))
	_, err := ix.StoreGroup("a", &GroupStore{Group: 1, Kind: GroupMamba, Hashes: []uint64{1, 2}})
	require.NoError(t, err)
	// Counts at the bound, as 2^31 stores leave them (setting them spares
	// the test 2^31 calls).
	hy, _ := ix.hybrid.Load("a")
	gs := hy.find(1)
	for _, h := range []uint64{1, 2} {
		r := gs.byHash[h]
		gs.byHash[h] = hashRef{key: r.key, n: maxSnapshotCount}
		gs.held[r.key] = maxSnapshotCount
	}
	_, err = ix.StoreGroup("a", &GroupStore{Group: 1, Kind: GroupMamba, Hashes: []uint64{1, 2, 2}})
	require.NoError(t, err)
	for _, h := range []uint64{1, 2} {
		require.Equal(t, uint32(maxSnapshotCount), gs.byHash[h].n, "hash %d", h)
		require.Equal(t, uint32(maxSnapshotCount), gs.held[gs.byHash[h].key], "hash %d", h)
	}
	dst := snapshotCopy(t, ix, Config{})
	require.Equal(t, dumpGroups(ix, "a"), dumpGroups(dst, "a"))
	require.Equal(t, 0, dst.RemoveGroup("a", 1, []uint64{1}), "one removal of a block stored that often keeps it")
}

// A snapshot names each endpoint once: a second section of an endpoint
// already loaded is refused as malformed, whatever it holds. Checked only
// by what the index held (its entries), a forged section of groups alone
// passed the second time, and its groups' store counts were loaded twice.
func TestSnapshotRefusesAnEndpointTwice(t *testing.T) {
	src := newTestIndex(t, Config{})
	require.NoError(t, src.Store("g:1", storeEv("m", 100, seq(1, 4*testBS))))
	_, err := src.StoreGroup("g:1", &GroupStore{Group: 2, Kind: GroupMamba, Hashes: []uint64{103}})
	require.NoError(t, err)
	var buf bytes.Buffer
	info, err := src.WriteSnapshot(&buf)
	require.NoError(t, err)
	require.Len(t, info.Endpoints, 1)

	// The same section twice, the trailer counting two.
	b := buf.Bytes()
	secLen := int(binary.LittleEndian.Uint32(b[snapHeaderLen+1:]))
	sec := b[snapHeaderLen : snapHeaderLen+5+secLen+8]
	tr := bytes.Clone(b[len(b)-snapTrailerLen:])
	binary.LittleEndian.PutUint32(tr[1:], 2)
	binary.LittleEndian.PutUint64(tr[21:], xxh64(tr[:21]))
	twice := body(b[:snapHeaderLen], sec, sec, tr)

	dst := newTestIndex(t, Config{})
	_, err = dst.ReadSnapshot(bytes.NewReader(twice), SnapshotReadOptions{})
	require.ErrorIs(t, err, ErrSnapshotMalformed)
	require.Contains(t, err.Error(), "twice")
	require.Empty(t, dumpGroups(dst, "g:1"), "a refused snapshot leaves nothing")
}
