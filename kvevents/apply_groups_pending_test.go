package kvevents

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// hybridMatch returns the usable prefix of toks on testEndpoint.
func hybridMatch(f *applyFixture, toks []uint32) int {
	keys := kvindex.Keys(nil, toks, 4, &kvindex.KeyParams{Model: "m"})
	var out kvindex.MatchResult
	f.ix.Match(keys, []string{testEndpoint}, &out)
	return out.Blocks(0)
}

// vLLM caches a step's blocks group by group in group order, and a model
// whose first layer is sliding-window or Mamba numbers that group before
// full attention: its stores come first in the batch. They are recorded
// once the full-attention store maps their hashes, nothing is counted as
// unknown, and the endpoint's usable prefixes are those of the
// full-attention-first order.
func TestGroupStoresBeforeFullAttentionInOneBatch(t *testing.T) {
	toks := wiretest.TokensRange(1, 24)
	fa := storedE(4, 100, 0, toks)
	sw := groupStore(0, "sliding_window", 9, 100, 0, 1, 2, 3, 5)
	mamba := groupStore(1, "mamba", 0, 100, 1, 3, 5)
	fa.Group = 2
	want := newApplyFixture(t)
	want.applyBatch(testEndpoint, wiretest.BatchOf(0, true, fa, sw, mamba), wire.FormatVLLM)
	f := newApplyFixture(t)
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, sw, mamba, fa), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Stored: 3, StoredBlocks: 5 + 3 + 6}, res)
	require.Zero(t, skipped(t, f.reg, "sliding_window", kvindex.ReasonUnknownHash))
	require.Zero(t, skipped(t, f.reg, "mamba", kvindex.ReasonUnknownHash))
	for n := 1; n <= 6; n++ {
		require.Equal(t, hybridMatch(want, toks[:4*n]), hybridMatch(f, toks[:4*n]), "%d blocks", n)
	}
	require.Equal(t, 4, hybridMatch(f, toks), "the window lacks block 4")
	require.Equal(t, 4, hybridMatch(want, toks))
}

// A group store whose full-attention store comes in the next batch is
// recorded then; a group removal of a pending hash cancels it; a group
// store whose blocks are never stored is given up after the next batch.
func TestGroupStoresPendingAcrossBatches(t *testing.T) {
	toks := wiretest.TokensRange(1, 24)
	f := newApplyFixture(t)
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true,
		groupStore(1, "mamba", 0, 100, 1, 3, 5), groupRemove(1, 100, 3)), wire.FormatVLLM)
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, storedE(4, 100, 0, toks)), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 6}, res)
	require.Equal(t, 6, hybridMatch(f, toks), "the state at 6 blocks")
	require.Equal(t, 2, hybridMatch(f, toks[:4*5]), "the state at 4 blocks was removed while pending")
	require.Zero(t, skipped(t, f.reg, "mamba", kvindex.ReasonUnknownHash))

	// Never stored: pending through the next batch, then counted.
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, groupStore(1, "mamba", 0, 900, 0, 1)), wire.FormatVLLM)
	require.Equal(t, 2, f.a.state(testEndpoint).pendN)
	res = f.applyBatch(testEndpoint, wiretest.BatchOf(0, true), wire.FormatVLLM)
	require.Equal(t, ApplyResult{SkippedBlocks: 2}, res)
	require.Equal(t, 1.0, skipped(t, f.reg, "mamba", kvindex.ReasonUnknownHash))
	st := f.a.state(testEndpoint)
	require.Zero(t, st.pendN)
	require.Empty(t, st.pend)
}

// Pending hashes are bounded per endpoint: beyond maxPendingGroupHashes a
// group store's unmapped hashes are counted at once; AllBlocksCleared
// drops what is pending.
func TestGroupStoresPendingBounded(t *testing.T) {
	f := newApplyFixture(t)
	idx := make([]int, maxPendingGroupHashes+10)
	for i := range idx {
		idx[i] = i
	}
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, groupStore(1, "mamba", 0, 5000, idx...)), wire.FormatVLLM)
	require.Equal(t, 10, res.SkippedBlocks)
	require.Equal(t, 1.0, skipped(t, f.reg, "mamba", kvindex.ReasonUnknownHash))
	st := f.a.state(testEndpoint)
	require.Equal(t, maxPendingGroupHashes, st.pendN)
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, wire.Event{Type: wire.EventAllBlocksCleared}), wire.FormatVLLM)
	require.Zero(t, st.pendN)
}
