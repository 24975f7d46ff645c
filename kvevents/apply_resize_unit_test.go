package kvevents

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// storedE is a BlockStored of tokens in blocks of bs tokens, hashes
// base+1, base+2, …, with the given parent (0 = none).
func storedE(bs int, base uint64, parent uint64, tokens []uint32) wire.Event {
	n := len(tokens) / bs
	e := wire.Event{Type: wire.EventBlockStored, TokenIDs: tokens, BlockSize: bs, Medium: "GPU",
		Group: 0, HasGroup: true, Kind: "full_attention", ParentHash: parent, HasParent: parent != 0}
	for i := 0; i < n; i++ {
		e.BlockHashes = append(e.BlockHashes, base+uint64(i)+1)
	}
	return e
}

func removedE(hashes ...uint64) wire.Event {
	return wire.Event{Type: wire.EventBlockRemoved, BlockHashes: hashes, Medium: "GPU", HasGroup: true}
}

// The fixture's index has block size 4.

func TestResizedSmallerEngineChainsAcrossStores(t *testing.T) {
	f := newApplyFixture(t)
	// Engine blocks of 2: 1..6 leaves 5,6 over, the child completes 5..8
	// and 9..12.
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true,
		storedE(2, 100, 0, wiretest.TokensRange(1, 6)),
		storedE(2, 200, 103, wiretest.TokensRange(7, 12))), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Stored: 2, StoredBlocks: 6}, res)
	require.Equal(t, 3, f.match(testEndpoint, wiretest.TokensRange(1, 12), kvindex.KeyParams{}).Blocks)
	require.Equal(t, 2, f.ix.EngineBlockSize(testEndpoint))

	// Removing the engine block completing a router block removes it.
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, removedE(203)), wire.FormatVLLM)
	require.Equal(t, 2, f.match(testEndpoint, wiretest.TokensRange(1, 12), kvindex.KeyParams{}).Blocks)
	// 202 completes nothing: no effect.
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, removedE(202)), wire.FormatVLLM)
	require.Equal(t, 2, f.match(testEndpoint, wiretest.TokensRange(1, 12), kvindex.KeyParams{}).Blocks)
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, removedE(201, 102)), wire.FormatVLLM)
	require.Equal(t, 0, f.match(testEndpoint, wiretest.TokensRange(1, 12), kvindex.KeyParams{}).Blocks)
}

func TestResizedNonMultipleEngine(t *testing.T) {
	f := newApplyFixture(t)
	// Engine blocks of 3 against the index's 4: 1..6 | 7..12, the
	// first store completes router block 0, the second blocks 1 and 2.
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true,
		storedE(3, 100, 0, wiretest.TokensRange(1, 6)),
		storedE(3, 200, 102, wiretest.TokensRange(7, 12))), wire.FormatVLLM)
	require.Equal(t, 3, f.match(testEndpoint, wiretest.TokensRange(1, 12), kvindex.KeyParams{}).Blocks)
	// A prompt of 1..8 holds router blocks 0 and 1, but the engine's
	// blocks within them are 1..3 and 4..6: one router block usable.
	require.Equal(t, 1, f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks)
	// 202 (10..12) completes router block 2 (9..12). The engine still
	// reuses 1..9, but router blocks 0 and 1 guarantee only its blocks
	// ending within them, 1..6: the documented lower bound.
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, removedE(202)), wire.FormatVLLM)
	require.Equal(t, 1, f.match(testEndpoint, wiretest.TokensRange(1, 12), kvindex.KeyParams{}).Blocks)
	// 201 (7..9) completes router block 1; router block 0 guarantees only
	// the engine block 1..3.
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, removedE(201)), wire.FormatVLLM)
	require.Equal(t, 0, f.match(testEndpoint, wiretest.TokensRange(1, 12), kvindex.KeyParams{}).Blocks)
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, removedE(101)), wire.FormatVLLM)
	require.Equal(t, 0, f.match(testEndpoint, wiretest.TokensRange(1, 12), kvindex.KeyParams{}).Blocks)
}

func TestResizedLargerEngineByRatio(t *testing.T) {
	f := newApplyFixture(t)
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true,
		storedE(8, 100, 0, wiretest.TokensRange(1, 16)),
		storedE(8, 200, 102, wiretest.TokensRange(17, 24))), wire.FormatVLLM)
	require.Equal(t, 6, f.match(testEndpoint, wiretest.TokensRange(1, 24), kvindex.KeyParams{}).Blocks)
	// A prompt ending inside engine block 101 (tokens 9..16) reuses only
	// block 100's two router blocks.
	require.Equal(t, 2, f.match(testEndpoint, wiretest.TokensRange(1, 15), kvindex.KeyParams{}).Blocks)

	// A tier-only store (offload to CPU) maps by the ratio too.
	cpu := wire.Event{Type: wire.EventBlockStored, BlockHashes: []uint64{101}, BlockSize: 8, Medium: "CPU", HasGroup: true, Kind: "full_attention"}
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, cpu), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 1}, res)
	m := f.match(testEndpoint, wiretest.TokensRange(1, 24), kvindex.KeyParams{})
	require.Equal(t, 6, m.Blocks)
	require.Equal(t, 2, m.CPU)

	res = f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, removedE(201)), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Removed: 1, RemovedBlocks: 2}, res)
	require.Equal(t, 4, f.match(testEndpoint, wiretest.TokensRange(1, 24), kvindex.KeyParams{}).Blocks)
}

func TestResizedConfiguredSizeMapsRemovalsBeforeAnyStore(t *testing.T) {
	f := newApplyFixture(t)
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, storedE(8, 100, 0, wiretest.TokensRange(1, 16))), wire.FormatVLLM)
	f.a.forget(testEndpoint)                                             // a resumed stream: the Applier remembers only
	f.a.restoreGroups(testEndpoint, map[int]string{0: "full_attention"}) // the groups recorded with its position
	f.a.setBlockSize(testEndpoint, 8)                                    // and the endpoint's configured block size
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, removedE(102)), wire.FormatVLLM)
	require.Equal(t, 2, f.match(testEndpoint, wiretest.TokensRange(1, 16), kvindex.KeyParams{}).Blocks)
}

// A checkpoint holds an endpoint's router blocks, not its engine block
// size, which caps its matches to whole engine blocks
// (kvindex.Index.SetEngineBlockSize). A pool that resumes on the restored
// index applies the endpoint's configured block size (Endpoint.BlockSize)
// to the cap once Ensure is given the endpoint, not only once the engine
// stores again: the restored blocks are matched as the engine can reuse
// them.
func TestResizedConfiguredSizeCapsMatchesAfterRestore(t *testing.T) {
	f := newApplyFixture(t)
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, storedE(8, 100, 0, wiretest.TokensRange(1, 16))), wire.FormatVLLM)
	// 1..15 holds router blocks 1..4, 5..8, 9..12, but of the engine's
	// blocks only 1..8 ends within them.
	require.Equal(t, 2, f.match(testEndpoint, wiretest.TokensRange(1, 15), kvindex.KeyParams{}).Blocks)
	var buf bytes.Buffer
	_, err := f.ix.WriteSnapshot(&buf)
	require.NoError(t, err)
	checkpoint := buf.Bytes()

	for name, cfg := range map[string]PoolConfig{"dial": {Model: "m"}, "bind": {Model: "m", BindAddress: "127.0.0.1:0"}} {
		t.Run(name, func(t *testing.T) {
			defer leakcheck.Check(t)()
			restored, err := kvindex.New(kvindex.Config{BlockSize: 4, SweepInterval: -1}, kvindex.Options{})
			require.NoError(t, err)
			defer restored.Close()
			_, err = restored.ReadSnapshot(bytes.NewReader(checkpoint), kvindex.SnapshotReadOptions{})
			require.NoError(t, err)
			p, err := NewPool(cfg, restored, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry()}})
			require.NoError(t, err)
			defer p.Close()
			// Nothing listens there, and nothing connects to the bind
			// socket: the engine stores nothing after the restore.
			require.NoError(t, p.Ensure(Endpoint{ID: testEndpoint, EventsAddress: "tcp://127.0.0.1:1", BlockSize: 8}))
			g := *f
			g.t, g.ix = t, restored
			require.Equal(t, 2, g.match(testEndpoint, wiretest.TokensRange(1, 15), kvindex.KeyParams{}).Blocks,
				"the restored endpoint's matches are not rounded to whole engine blocks")
			require.Equal(t, 8, restored.EngineBlockSize(testEndpoint))
			require.NoError(t, p.Close())
		})
	}
}

func TestResizedExtraKeysAndSalt(t *testing.T) {
	f := newApplyFixture(t)
	mm := storedE(2, 100, 0, wiretest.TokensRange(1, 8))
	mm.ExtraKeys = [][]wire.ExtraKey{nil, {{Kind: wire.ExtraKeyString, Value: "img"}}, nil, nil}
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, mm), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Skipped: 1, SkippedBlocks: 4}, res)
	require.Equal(t, 1.0, skipped(t, f.reg, "full_attention", skipResizedExtraKeys))

	// A cache salt on block 0 goes on router block 0, also when the router
	// block is completed by a later store.
	salted := storedE(2, 300, 0, wiretest.TokensRange(1, 2))
	salted.ExtraKeys = [][]wire.ExtraKey{{{Kind: wire.ExtraKeyString, Value: "salt"}}}
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, salted, storedE(2, 400, 301, wiretest.TokensRange(3, 8))), wire.FormatVLLM)
	require.Equal(t, 2, f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{CacheSalt: "salt"}).Blocks)
	require.Equal(t, 0, f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks)
}

// An engine block larger than the router's spans several router blocks, so
// its extra keys would have to be split across them: a multimodal item of
// block 0 belongs to the router blocks its placeholders overlap, which the
// event does not say. Such a store is skipped and counted like any other
// extra key that cannot be re-split, instead of being indexed with the
// item on router block 0, a key no request computes (the request keys the
// item on the router blocks it overlaps). A cache salt alone on block 0
// still goes on router block 0.
func TestResizedLargerEngineBlockZeroMultimodalSkipped(t *testing.T) {
	toks := wiretest.TokensRange(1, 8)
	mmForms := map[string][]wire.ExtraKey{
		"pair":              {{Kind: wire.ExtraKeyMM, Value: "img", Offset: 5}},
		"bare and salt":     {{Kind: wire.ExtraKeyString, Value: "img"}, {Kind: wire.ExtraKeyString, Value: "salt"}},
		"pair and salt":     {{Kind: wire.ExtraKeyMM, Value: "img", Offset: 5}, {Kind: wire.ExtraKeyString, Value: "salt"}},
		"prompt embeddings": {{Kind: wire.ExtraKeyBytes, Value: "00ff"}},
	}
	for name, keys := range mmForms {
		t.Run(name, func(t *testing.T) {
			f := newApplyFixture(t)
			ev := storedE(8, 100, 0, toks)
			ev.ExtraKeys = [][]wire.ExtraKey{keys}
			res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, ev), wire.FormatVLLM)
			require.Equal(t, ApplyResult{Skipped: 1, SkippedBlocks: 1}, res)
			require.Equal(t, 1.0, skipped(t, f.reg, "full_attention", skipResizedExtraKeys))
			require.Zero(t, f.ix.Stats().Blocks, "nothing indexed under keys no request computes")
		})
	}
	for name, keys := range map[string][]wire.ExtraKey{
		"string": {{Kind: wire.ExtraKeyString, Value: "salt"}},
		"typed":  {{Kind: wire.ExtraKeySalt, Value: "salt"}},
	} {
		t.Run("salt "+name, func(t *testing.T) {
			f := newApplyFixture(t)
			ev := storedE(8, 100, 0, toks)
			ev.ExtraKeys = [][]wire.ExtraKey{keys}
			res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, ev), wire.FormatVLLM)
			require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 1}, res)
			require.Equal(t, 2, f.match(testEndpoint, toks, kvindex.KeyParams{CacheSalt: "salt"}).Blocks)
		})
	}
	// At the index's block size, or below it, block 0's multimodal keys
	// lie within router block 0 and are kept.
	f := newApplyFixture(t)
	ev := storedE(2, 100, 0, toks)
	ev.ExtraKeys = [][]wire.ExtraKey{{{Kind: wire.ExtraKeyMM, Value: "img", Offset: 1}}, nil, nil, nil}
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, ev), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 4}, res)
	mm := kvindex.KeyParams{MM: []kvindex.MMItem{{Hash: "img", Offset: 1, Length: 1}}}
	require.Equal(t, 2, f.match(testEndpoint, toks, mm).Blocks)
}

func TestResizedUnmappedCounted(t *testing.T) {
	f := newApplyFixture(t)
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, storedE(3, 100, 0, wiretest.TokensRange(1, 6))), wire.FormatVLLM)
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, removedE(999)), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Skipped: 1, SkippedBlocks: 1}, res)
	require.Equal(t, 1.0, skipped(t, f.reg, "none", skipResizedUnmapped))
	res = f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, storedE(3, 200, 999, wiretest.TokensRange(1, 3))), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Dropped: 1, ParentMissing: 1}, res)
}

func TestResizedSideTableBounded(t *testing.T) {
	ix, err := kvindex.New(kvindex.Config{BlockSize: 4, SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	a, err := NewApplier(ApplierConfig{Model: "m", MaxResizedBlocksPerEndpoint: 4}, ix, Options{})
	require.NoError(t, err)
	b := wiretest.BatchOf(0, true, storedE(3, 100, 0, wiretest.TokensRange(1, 30)))
	a.Apply(testEndpoint, "", b)
	st := a.state(testEndpoint)
	require.Equal(t, 4, st.side.len())
	// The first blocks were forgotten: a child of one is dropped.
	res := a.Apply(testEndpoint, "", wiretest.BatchOf(0, true, storedE(3, 200, 101, wiretest.TokensRange(4, 6))))
	require.Equal(t, 1, res.ParentMissing)
	// Blocks coming and going keep the store order within bounds.
	for i := uint64(0); i < 1000; i++ {
		a.Apply(testEndpoint, "", wiretest.BatchOf(0, true, storedE(3, 1000+i*10, 0, wiretest.TokensRange(1, 3)), removedE(1000+i*10+1)))
	}
	require.LessOrEqual(t, len(st.side.order)-st.side.head, 2*4+64+1)
	// AllBlocksCleared forgets them all.
	a.Apply(testEndpoint, "", wiretest.BatchOf(0, true, wire.Event{Type: wire.EventAllBlocksCleared}))
	require.Zero(t, a.state(testEndpoint).side.len())
}

// TestResizedSelfDescribingOffloadKeepsKeys: at an engine block size not
// the index's, vLLM's self-describing offloading events (tokens, no extra
// keys) keep the keys of the router blocks the endpoint already maps, as
// at the index's block size: the salted chain's CPU copy neither loses the
// salted match nor gives an unsalted request one.
func TestResizedSelfDescribingOffloadKeepsKeys(t *testing.T) {
	for _, bs := range []int{2, 3, 8} {
		t.Run(fmt.Sprintf("engine_block_size_%d", bs), func(t *testing.T) {
			f := newApplyFixture(t)
			gpu := storedE(bs, 100, 0, wiretest.TokensRange(1, 24))
			gpu.ExtraKeys = [][]wire.ExtraKey{{{Kind: wire.ExtraKeyString, Value: "salt-A"}}}
			f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, gpu), wire.FormatVLLM)
			salted := kvindex.KeyParams{CacheSalt: "salt-A"}
			require.Equal(t, 6, f.match(testEndpoint, wiretest.TokensRange(1, 24), salted).Blocks)

			cpu := storedE(bs, 100, 0, wiretest.TokensRange(1, 24))
			cpu.Medium = "CPU"
			res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, cpu), wire.FormatVLLM)
			require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 24 / bs}, res)
			m := f.match(testEndpoint, wiretest.TokensRange(1, 24), salted)
			require.Equal(t, 6, m.GPU)
			require.Equal(t, 6, m.CPU)
			require.Zero(t, f.match(testEndpoint, wiretest.TokensRange(1, 24), kvindex.KeyParams{}).Blocks,
				"an unsalted request never held these blocks")
		})
	}
}
