package kvindex

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStoreThenMatchContiguousPrefix(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 6*testBS)
	// Endpoint A stores blocks 0-3 in two events chained by parent hash.
	require.NoError(t, ix.Store("a", storeEv("m", 100, prompt[:2*testBS])))
	require.NoError(t, ix.Store("a", withParent(storeEv("m", 102, prompt[2*testBS:4*testBS]), 101)))
	// Endpoint B stores blocks 0-1 only.
	require.NoError(t, ix.Store("b", storeEv("m", 900, prompt[:2*testBS])))

	r := match(ix, "m", prompt, "a", "b", "unknown")
	require.Equal(t, 6, r.Total)
	require.Equal(t, []int{4, 2, 0}, blocksOf(r))
	require.Equal(t, EndpointMatch{Endpoint: "a", Blocks: 4, Score: 4, GPU: 4}, r.Endpoints()[0])
	require.Equal(t, EndpointMatch{Endpoint: "unknown"}, r.Endpoints()[2])

	st := ix.Stats()
	require.Equal(t, 4, st.Blocks)
	require.Equal(t, 6, st.Memberships)
	require.Equal(t, 2, st.Endpoints)
}

func TestMatchStopsAtFirstGap(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 3*testBS)
	keys := Keys(nil, prompt, testBS, &KeyParams{Model: "m"})
	// Block 1 is missing on "a" (only speculated by "b" for block 1 and 2):
	// a reusable prefix must be unbroken.
	require.NoError(t, ix.Store("a", storeEv("m", 1, prompt[:testBS])))
	ix.Speculate("a", keys[2:3], 0)
	ix.Speculate("b", keys[1:3], 0)
	r := match(ix, "m", prompt, "a", "b")
	require.Equal(t, []int{1, 0}, blocksOf(r))
}

func TestParentMissingIndexesNothing(t *testing.T) {
	ix := newTestIndex(t, Config{})
	err := ix.Store("a", withParent(storeEv("m", 10, seq(1, 2*testBS)), 9))
	var se *StoreError
	require.ErrorAs(t, err, &se)
	require.ErrorIs(t, err, ErrParentMissing)
	require.Equal(t, ReasonParentMissing, se.Reason)
	require.Equal(t, 2, se.Skipped)
	// A rejected store leaves no trace: no endpoint, no ID, no tier.
	require.Equal(t, Stats{}, ix.Stats())
	require.Zero(t, ix.maxID.Load())
	// The orphan's hashes were not recorded, so its child fails too.
	require.ErrorIs(t, ix.Store("a", withParent(storeEv("m", 12, seq(9, testBS)), 11)), ErrParentMissing)
	// Nor does a tier-only store for an unknown endpoint (its hashes cannot
	// be known): it is ErrUnknownHash, all of it skipped.
	ev := &StoreEvent{EngineHashes: []uint64{10, 11}, BlockSize: testBS, Tier: "cpu-new", Group: 0}
	err = ix.Store("b", ev)
	require.ErrorAs(t, err, &se)
	require.ErrorIs(t, err, ErrUnknownHash)
	require.Equal(t, 2, se.Skipped)
	require.Equal(t, Stats{}, ix.Stats())
	require.Len(t, ix.tiers.Load().names, 3) // "cpu-new" not registered
	// A known endpoint's rejected store registers no tier either.
	require.NoError(t, ix.Store("a", storeEv("m", 1, seq(1, testBS))))
	require.ErrorIs(t, ix.Store("a", &StoreEvent{EngineHashes: []uint64{99}, BlockSize: testBS, Tier: "cpu-new", Group: 0}), ErrUnknownHash)
	require.ErrorIs(t, ix.Store("a", withParent(&StoreEvent{EngineHashes: []uint64{5}, Tokens: seq(50, testBS),
		BlockSize: testBS, Model: "m", Tier: "cpu-new", Group: 0}, 77)), ErrParentMissing)
	require.Len(t, ix.tiers.Load().names, 3)
	require.Equal(t, 1, ix.Stats().Endpoints)
}

// Pitfall: a fleet-wide engine-hash map lets pod B (model Y) overwrite the
// mapping pod A (model X) made for the same engine hash, so A's next block
// chains off Y's key.
func TestSameEngineHashOnTwoEndpointsWithDifferentModels(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 2*testBS)
	require.NoError(t, ix.Store("a", storeEv("model-x", 0xE1, prompt[:testBS])))
	require.NoError(t, ix.Store("b", storeEv("model-y", 0xE1, prompt[:testBS])))
	require.NoError(t, ix.Store("a", withParent(storeEv("model-x", 0xE2, prompt[testBS:]), 0xE1)))
	require.NoError(t, ix.Store("b", withParent(storeEv("model-y", 0xE2, prompt[testBS:]), 0xE1)))

	require.Equal(t, []int{2, 0}, blocksOf(match(ix, "model-x", prompt, "a", "b")))
	require.Equal(t, []int{0, 2}, blocksOf(match(ix, "model-y", prompt, "a", "b")))
}

func TestLoRAEventsRootAtAdapterName(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 2*testBS)
	require.NoError(t, ix.Store("a", storeEv("sql-adapter", 1, prompt)))
	var out MatchResult
	ix.Match(Keys(nil, prompt, testBS, &KeyParams{Model: "base", LoRA: "sql-adapter"}), []string{"a"}, &out)
	require.Equal(t, 2, out.Endpoints()[0].Blocks)
	ix.Match(Keys(nil, prompt, testBS, &KeyParams{Model: "base"}), []string{"a"}, &out)
	require.Equal(t, 0, out.Endpoints()[0].Blocks)
}

func TestEventExtraKeysMeetRequestKeys(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 3*testBS)
	ev := storeEv("m", 1, prompt)
	// Salt on block 0, an image overlapping blocks 1 and 2 (as the decoder
	// reduces vLLM's (identifier, offset) pairs to the identifier).
	ev.ExtraKeys = [][]string{{"salt-A"}, {"img-1"}, {"img-1"}}
	require.NoError(t, ix.Store("a", ev))
	p := &KeyParams{Model: "m", CacheSalt: "salt-A", MM: []MMItem{{Hash: "img-1", Offset: 6, Length: 4}}}
	var out MatchResult
	ix.Match(Keys(nil, prompt, testBS, p), []string{"a"}, &out)
	require.Equal(t, 3, out.Endpoints()[0].Blocks)
	// Without the salt nothing matches.
	ix.Match(Keys(nil, prompt, testBS, &KeyParams{Model: "m", MM: p.MM}), []string{"a"}, &out)
	require.Equal(t, 0, out.Endpoints()[0].Blocks)
}

func TestRejectedStores(t *testing.T) {
	ix := newTestIndex(t, Config{})
	for _, tc := range []struct {
		name   string
		mutate func(*StoreEvent)
		target error
		reason Reason
	}{
		{"block size mismatch", func(e *StoreEvent) { e.BlockSize = 16; e.Tokens = seq(1, 32) }, ErrBlockSizeMismatch, ReasonBlockSizeMismatch},
		{"zero block size", func(e *StoreEvent) { e.BlockSize = 0 }, ErrBlockSizeMismatch, ReasonBlockSizeMismatch},
		{"sliding window", func(e *StoreEvent) { e.Kind = "sliding_window" }, ErrNotIndexable, ReasonNonPrefixKind},
		{"mamba", func(e *StoreEvent) { e.Kind = "mamba" }, ErrNotIndexable, ReasonNonPrefixKind},
		{"unknown kind", func(e *StoreEvent) { e.Kind = "unknown" }, ErrNotIndexable, ReasonNonPrefixKind},
		{"tail tokens", func(e *StoreEvent) { e.Tokens = seq(1, 2*testBS+1) }, ErrNonDense, ReasonNonDense},
		{"sparse hashes", func(e *StoreEvent) { e.EngineHashes = e.EngineHashes[:1] }, ErrNonDense, ReasonNonDense},
		{"extra keys length", func(e *StoreEvent) { e.ExtraKeys = [][]string{nil} }, ErrMalformed, ReasonMalformed},
		{"group", func(e *StoreEvent) { e.Group = -2 }, ErrMalformed, ReasonMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := storeEv("m", 1, seq(1, 2*testBS))
			tc.mutate(ev)
			err := ix.Store("a", ev)
			var se *StoreError
			require.ErrorAs(t, err, &se)
			require.ErrorIs(t, err, tc.target)
			require.Equal(t, tc.reason, se.Reason)
			require.Equal(t, ev.Kind, se.Kind)
			require.NotEmpty(t, se.Error())
		})
	}
	require.Equal(t, 0, ix.Stats().Memberships)
	require.Equal(t, 0, ix.Stats().Endpoints, "rejected events register nothing")
	require.ErrorIs(t, ix.Store("a", nil), ErrMalformed)
	// Ungrouped events and the other prefix kinds are indexed.
	for i, kind := range []string{"", "mla_attention", "sink_full_attention"} {
		ev := storeEv("m", uint64(10*i+10), seq(100*i, testBS))
		ev.Kind, ev.Group = kind, -1
		require.NoError(t, ix.Store("a", ev))
	}
	require.Equal(t, 3, ix.Stats().Memberships)
}

func TestTierOnlyStoreAndTierSpecificRemove(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 3*testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 1, prompt)))
	// Offload of blocks 0 and 1 to CPU: hashes only, plus one unknown hash.
	off := &StoreEvent{EngineHashes: []uint64{1, 2, 77}, BlockSize: testBS, Tier: "CPU", Group: 0, Kind: "full_attention"}
	err := ix.Store("a", off)
	var se *StoreError
	require.ErrorAs(t, err, &se)
	require.ErrorIs(t, err, ErrUnknownHash)
	require.Equal(t, 1, se.Skipped)

	r := match(ix, "m", prompt, "a")
	require.Equal(t, EndpointMatch{Endpoint: "a", Blocks: 3, Score: 3, GPU: 3, CPU: 2}, r.Endpoints()[0])

	// GPU evicts blocks 0 and 1; the CPU copies keep the prefix at CPU weight.
	require.Equal(t, 2, ix.Remove("a", []uint64{1, 2}, "GPU", 0))
	r = match(ix, "m", prompt, "a")
	require.Equal(t, 3, r.Endpoints()[0].Blocks)
	require.Equal(t, 1, r.Endpoints()[0].GPU)
	require.Equal(t, 2, r.Endpoints()[0].CPU)
	require.InDelta(t, 0.8+0.8+1, r.Endpoints()[0].Score, 1e-12)

	// CPU drops block 0: nothing holds it, so the prefix is gone and the
	// engine hash is forgotten (a child store would now miss its parent).
	require.Equal(t, 1, ix.Remove("a", []uint64{1}, "cpu", 0))
	require.Equal(t, 0, match(ix, "m", prompt, "a").Endpoints()[0].Blocks)
	require.ErrorIs(t, ix.Store("a", withParent(storeEv("m", 50, seq(1, testBS)), 1)), ErrParentMissing)
	require.NoError(t, ix.Store("a", withParent(storeEv("m", 51, seq(1, testBS)), 2)))

	// Removing a tier, group, hash or endpoint that holds nothing is a no-op.
	require.Equal(t, 0, ix.Remove("a", []uint64{3}, "storage", 0))
	require.Equal(t, 0, ix.Remove("a", []uint64{3}, "disk", 0))
	require.Equal(t, 0, ix.Remove("a", []uint64{3}, "gpu", 5))
	require.Equal(t, 0, ix.Remove("a", []uint64{999}, "gpu", 0))
	require.Equal(t, 0, ix.Remove("nobody", []uint64{3}, "gpu", 0))
	require.Equal(t, 0, ix.Remove("a", nil, "gpu", 0))
}

func TestEveryTierIsReferenceCounted(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 1, prompt)))
	// vLLM cached a second GPU copy of the block (two requests computed it in
	// one step) and announced it too.
	require.NoError(t, ix.Store("a", storeEv("m", 1, prompt)))
	// The offloading connector announces the CPU copy in two overlapping chunks.
	off := &StoreEvent{EngineHashes: []uint64{1}, BlockSize: testBS, Tier: "cpu", Group: 0}
	require.NoError(t, ix.Store("a", off))
	require.NoError(t, ix.Store("a", off))

	require.Equal(t, 0, ix.Remove("a", []uint64{1}, "gpu", 0), "evicting one GPU copy keeps the other")
	require.Equal(t, 1, match(ix, "m", prompt, "a").Endpoints()[0].GPU)
	// A block chained on it still finds its parent.
	require.NoError(t, ix.Store("a", withParent(storeEv("m", 2, seq(100, testBS)), 1)))
	require.Equal(t, 1, ix.Remove("a", []uint64{1}, "gpu", 0))
	require.Equal(t, 0, match(ix, "m", prompt, "a").Endpoints()[0].GPU)
	require.Equal(t, 0, ix.Remove("a", []uint64{1}, "cpu", 0), "first CPU removal only drops a reference")
	require.Equal(t, 1, match(ix, "m", prompt, "a").Endpoints()[0].CPU)
	require.Equal(t, 1, ix.Remove("a", []uint64{1}, "cpu", 0))
	require.Equal(t, 0, match(ix, "m", prompt, "a").Endpoints()[0].Blocks)
	require.Equal(t, 1, ix.Stats().Memberships, "only the child block is left")
}

func TestGroupsAreTrackedPerMembership(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 2*testBS)
	// A hybrid model with two full-attention groups stores the same hashes
	// (hashes do not include the group) in both.
	g0 := storeEv("m", 1, prompt)
	g1 := storeEv("m", 1, prompt)
	g1.Group = 1
	require.NoError(t, ix.Store("a", g0))
	require.NoError(t, ix.Store("a", g1))
	// A sliding-window group of the same model is rejected.
	sw := storeEv("m", 1, prompt)
	sw.Group, sw.Kind = 2, "sliding_window"
	var se *StoreError
	require.ErrorAs(t, ix.Store("a", sw), &se)
	require.Equal(t, "sliding_window", se.Kind)

	require.Equal(t, 2, ix.Remove("a", []uint64{1, 2}, "gpu", 0))
	require.Equal(t, 2, match(ix, "m", prompt, "a").Endpoints()[0].Blocks, "group 1 still holds the blocks")
	require.Equal(t, 0, ix.Remove("a", []uint64{1, 2}, "gpu", 2))
	require.Equal(t, 2, ix.Remove("a", []uint64{1, 2}, "gpu", 1))
	require.Equal(t, 0, match(ix, "m", prompt, "a").Endpoints()[0].Blocks)
	require.Equal(t, Stats{Endpoints: 1}, ix.Stats())
}

func TestComplexMembershipStates(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 1, prompt)))
	// Pairs that do not fit the compact form: many groups, one tier in two
	// groups, large groups, deep reference counts.
	type tg struct {
		tier  string
		group int
	}
	adds := []tg{{"gpu", 7}, {"cpu", 0}, {"cpu", 3}, {"cpu_pinned", -1}, {"external", 200}}
	for _, a := range adds {
		require.NoError(t, ix.Store("a", &StoreEvent{EngineHashes: []uint64{1}, BlockSize: testBS, Tier: a.tier, Group: a.group}))
	}
	for i := 0; i < 6; i++ { // cpu/0 now counted 7 times
		require.NoError(t, ix.Store("a", &StoreEvent{EngineHashes: []uint64{1}, BlockSize: testBS, Tier: "cpu", Group: 0}))
	}
	r := match(ix, "m", prompt, "a").Endpoints()[0]
	require.Equal(t, EndpointMatch{Endpoint: "a", Blocks: 1, Score: 1, GPU: 1, CPU: 1, Other: 1}, r)

	require.Equal(t, 1, ix.Remove("a", []uint64{1}, "gpu", 0))
	require.Equal(t, 1, ix.Remove("a", []uint64{1}, "gpu", 7))
	r = match(ix, "m", prompt, "a").Endpoints()[0]
	require.Equal(t, 0, r.GPU)
	require.InDelta(t, 1.0, r.Score, 1e-12, "external tier weighs 1.0 by default")
	require.Equal(t, 1, ix.Remove("a", []uint64{1}, "external", 200))
	require.Equal(t, 1, ix.Remove("a", []uint64{1}, "cpu_pinned", -1))
	require.Equal(t, 1, ix.Remove("a", []uint64{1}, "cpu", 3))
	for i := 0; i < 6; i++ {
		require.Equal(t, 0, ix.Remove("a", []uint64{1}, "cpu", 0))
	}
	r = match(ix, "m", prompt, "a").Endpoints()[0]
	require.Equal(t, EndpointMatch{Endpoint: "a", Blocks: 1, Score: 0.8, CPU: 1}, r)
	require.Equal(t, 1, ix.Remove("a", []uint64{1}, "cpu", 0))
	require.Equal(t, Stats{Endpoints: 1}, ix.Stats())

	ep, _ := ix.lockEndpoint("a", false)
	defer ep.mu.Unlock()
	require.Empty(t, ep.cx, "side table entries are released")
	require.Equal(t, 0, ep.eng.Len())
}

func TestEngineHashRemappedToNewKey(t *testing.T) {
	ix := newTestIndex(t, Config{})
	require.NoError(t, ix.Store("a", storeEv("m", 1, seq(1, testBS))))
	// The same engine hash now arrives for other tokens: the old block is
	// no longer held through it.
	require.NoError(t, ix.Store("a", storeEv("m", 1, seq(50, testBS))))
	require.Equal(t, 0, match(ix, "m", seq(1, testBS), "a").Endpoints()[0].Blocks)
	require.Equal(t, 1, match(ix, "m", seq(50, testBS), "a").Endpoints()[0].Blocks)
	require.Equal(t, 1, ix.Stats().Memberships)
}

func TestClearEndpoint(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 3*testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 1, prompt)))
	require.NoError(t, ix.Store("a", &StoreEvent{EngineHashes: []uint64{1}, BlockSize: testBS, Tier: "cpu", Group: 0}))
	require.NoError(t, ix.Store("b", storeEv("m", 1, prompt)))
	ix.Speculate("a", Keys(nil, seq(100, testBS), testBS, &KeyParams{Model: "m"}), 0)

	require.Equal(t, 4, ix.Clear("a"))
	require.Equal(t, 0, ix.Clear("a"))
	require.Equal(t, 0, ix.Clear("never-seen"))
	require.Equal(t, []int{0, 3}, blocksOf(match(ix, "m", prompt, "a", "b")))
	st := ix.Stats()
	require.Equal(t, 3, st.Memberships)
	require.Equal(t, 1, st.Endpoints)
	require.Equal(t, uint64(4), st.EndpointRemovals)
	// The engine-hash map is gone: the endpoint starts over.
	require.ErrorIs(t, ix.Store("a", withParent(storeEv("m", 4, seq(13, testBS)), 3)), ErrParentMissing)
	require.NoError(t, ix.Store("a", storeEv("m", 1, prompt)))
	require.Equal(t, []int{3, 3}, blocksOf(match(ix, "m", prompt, "a", "b")))
}

func TestCapacityEvictsOldestBlocksOfThatEndpoint(t *testing.T) {
	ix := newTestIndex(t, Config{MaxBlocksPerEndpoint: 4})
	p1, p2 := seq(1, 3*testBS), seq(1000, 3*testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 1, p1)))
	require.NoError(t, ix.Store("b", storeEv("m", 1, p1)))
	require.NoError(t, ix.Store("a", storeEv("m", 10, p2)))
	// "a" holds 6 > 4: its two oldest (blocks 0 and 1 of p1) are gone.
	st := ix.Stats()
	require.Equal(t, uint64(2), st.CapacityEvictions)
	require.Equal(t, 4+3, st.Memberships)
	require.Equal(t, []int{0, 3}, blocksOf(match(ix, "m", p1, "a", "b")))
	require.Equal(t, []int{3, 0}, blocksOf(match(ix, "m", p2, "a", "b")))
	// Its newest p1 block is still mapped: a child of it can be stored.
	require.NoError(t, ix.Store("a", withParent(storeEv("m", 4, seq(99, testBS)), 3)))
	// That evicted hash 3; "a" now holds 10, 11, 12 (p2) and 4, oldest
	// first. A hash removed and stored again counts from its new store: the
	// next eviction takes 11, not the re-stored 10.
	require.Equal(t, 1, ix.Remove("a", []uint64{10}, "gpu", 0))
	require.NoError(t, ix.Store("a", storeEv("m", 10, p2[:testBS])))
	require.NoError(t, ix.Store("a", storeEv("m", 20, seq(500, testBS))))
	require.Equal(t, 1, match(ix, "m", p2, "a").Endpoints()[0].Blocks)
	require.Equal(t, uint64(4), ix.Stats().CapacityEvictions)
}

func TestStoreErrorsAreComparable(t *testing.T) {
	err := error(&StoreError{Reason: ReasonNonDense, Err: ErrNonDense})
	require.True(t, errors.Is(err, ErrNonDense))
	require.False(t, errors.Is(err, ErrParentMissing))
}
