package kvevents

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// groupStore is a store of group g (kind) naming the hashes of blocks idx
// of a chain whose hashes are base+1, base+2, … (tokens as the
// full-attention group stored them).
func groupStore(g int, kind string, window int64, base uint64, idx ...int) wire.Event {
	e := wire.Event{Type: wire.EventBlockStored, BlockSize: 4, Medium: "GPU", Group: g, HasGroup: true, Kind: kind}
	if window > 0 {
		e.SlidingWindow, e.HasSlidingWindow = window, true
	}
	for _, i := range idx {
		e.BlockHashes = append(e.BlockHashes, base+uint64(i)+1)
		e.TokenIDs = append(e.TokenIDs, wiretest.TokensRange(uint32(4*i+1), uint32(4*i+4))...)
	}
	return e
}

func groupRemove(g int, base uint64, idx ...int) wire.Event {
	e := wire.Event{Type: wire.EventBlockRemoved, Medium: "GPU", Group: g, HasGroup: true}
	for _, i := range idx {
		e.BlockHashes = append(e.BlockHashes, base+uint64(i)+1)
	}
	return e
}

// TestHybridGroupsLimitMatches: a full-attention group, a sliding-window
// group of 9 tokens (the next token needs the 2 blocks before the prefix
// end) and a Mamba group holding the state every other block. Match
// returns the longest prefix all three can serve; another endpoint without
// groups is unaffected.
func TestHybridGroupsLimitMatches(t *testing.T) {
	f := newApplyFixture(t)
	toks := wiretest.TokensRange(1, 24)
	fa := storedE(4, 100, 0, toks)
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, fa,
		groupStore(1, "sliding_window", 9, 100, 0, 1, 2, 3, 4, 5),
		groupStore(2, "mamba", 0, 100, 1, 3, 5)), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Stored: 3, StoredBlocks: 6 + 6 + 3}, res)
	f.applyBatch("10.0.0.2:8000", wiretest.BatchOf(0, true, fa), wire.FormatVLLM)
	both := func() (int, int) {
		keys := kvindex.Keys(nil, toks, 4, &kvindex.KeyParams{Model: "m"})
		var out kvindex.MatchResult
		f.ix.Match(keys, []string{testEndpoint, "10.0.0.2:8000"}, &out)
		return out.Blocks(0), out.Blocks(1)
	}
	h, plain := both()
	require.Equal(t, 6, h)
	require.Equal(t, 6, plain)

	// The window lost block 4: a prefix of 6 lacks it, 5 has no Mamba
	// state, 4 has both.
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, groupRemove(1, 100, 4)), wire.FormatVLLM)
	h, _ = both()
	require.Equal(t, 4, h)
	// The state at 4 blocks is gone: 2.
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, groupRemove(2, 100, 3)), wire.FormatVLLM)
	h, _ = both()
	require.Equal(t, 2, h)
	// The window's block 0 is gone: no prefix is usable.
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, groupRemove(1, 100, 0)), wire.FormatVLLM)
	h, plain = both()
	require.Equal(t, 0, h)
	require.Equal(t, 6, plain)

	// Stored again, usable again; AllBlocksCleared forgets the groups.
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true,
		groupStore(1, "sliding_window", 9, 100, 0, 4), groupStore(2, "mamba", 0, 100, 3)), wire.FormatVLLM)
	h, _ = both()
	require.Equal(t, 6, h)
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, wire.Event{Type: wire.EventAllBlocksCleared}, fa), wire.FormatVLLM)
	h, _ = both()
	require.Equal(t, 6, h, "a model whose groups are gone matches on its full-attention blocks")
}

func TestHybridGroupStoresCounted(t *testing.T) {
	f := newApplyFixture(t)
	// No window in the event and none configured.
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, groupStore(1, "sliding_window", 0, 100, 0)), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Skipped: 1, SkippedBlocks: 1}, res)
	require.Equal(t, 1.0, skipped(t, f.reg, "sliding_window", skipNoWindow))
	// Blocks the full-attention group never stored: pending through the
	// next batch, then given up and counted.
	res = f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, groupStore(2, "mamba", 0, 100, 0)), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 1}, res)
	require.Zero(t, skipped(t, f.reg, "mamba", kvindex.ReasonUnknownHash))
	res = f.applyBatch(testEndpoint, wiretest.BatchOf(0, true), wire.FormatVLLM)
	require.Equal(t, ApplyResult{SkippedBlocks: 1}, res)
	require.Equal(t, 1.0, skipped(t, f.reg, "mamba", kvindex.ReasonUnknownHash))
}

// TestHybridGroupOffloadRemovalKeepsDevice: vLLM's offloading connector
// reports the eviction of a sliding-window group's block from its CPU tier
// as a BlockRemoved with medium "CPU" and the group's group_idx
// (vllm/distributed/kv_transfer/kv_connector/v1/offloading/events.py). The
// group's set holds the blocks the device holds, so such a removal leaves
// it alone (counted as a skip of that kind); a GPU removal still applies.
func TestHybridGroupOffloadRemovalKeepsDevice(t *testing.T) {
	f := newApplyFixture(t)
	toks := wiretest.TokensRange(1, 24)
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, storedE(4, 100, 0, toks),
		groupStore(1, "sliding_window", 9, 100, 0, 1, 2, 3, 4, 5)), wire.FormatVLLM)
	require.Equal(t, 2, res.Stored)
	blocks := func() int {
		var out kvindex.MatchResult
		f.ix.Match(kvindex.Keys(nil, toks, 4, &kvindex.KeyParams{Model: "m"}), []string{testEndpoint}, &out)
		return out.Blocks(0)
	}
	require.Equal(t, 6, blocks())

	offloaded := groupRemove(1, 100, 4)
	offloaded.Medium = "CPU"
	require.Equal(t, ApplyResult{Skipped: 1, SkippedBlocks: 1},
		f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, offloaded), wire.FormatVLLM))
	require.Equal(t, 1.0, skipped(t, f.reg, "sliding_window", kvindex.ReasonNonPrefixKind))
	require.Equal(t, 6, blocks(), "the device still holds the window's block 4")

	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, groupRemove(1, 100, 4)), wire.FormatVLLM)
	require.Equal(t, 4, blocks())
}
