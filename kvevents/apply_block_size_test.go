package kvevents

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// A store naming a block size above any engine's (over 65536 tokens, the
// bound Endpoint.BlockSize has) is skipped as invalid_block_size, before
// it can teach the endpoint its block size. A tier-only or sliding-window
// store carries no tokens to check it against, and was mapped to
// block_size / the index's block size synthetic hashes per engine block:
// gigabytes for one hash at block_size 2^31-16, and every later removal of
// the endpoint mapped the same way, so its blocks were never removed.
func TestApplyRefusesBlockSizeBeyondEngines(t *testing.T) {
	f := newApplyFixture(t)
	require.Equal(t, 1, f.applyBatch(testEndpoint, wiretest.WantV1(), wire.FormatVLLM).Stored)

	offload := wire.Event{Type: wire.EventBlockStored, BlockHashes: []uint64{wiretest.H1, wiretest.H2},
		BlockSize: 1 << 20, Medium: "CPU", HasGroup: true, Kind: "full_attention"}
	window := offload
	window.Group, window.Kind = 1, "sliding_window"
	window.SlidingWindow, window.HasSlidingWindow = 128, true
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, offload, window), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Skipped: 2, SkippedBlocks: 4}, res)
	require.Equal(t, 1.0, skipped(t, f.reg, "full_attention", skipInvalidBlockSize))
	require.Equal(t, 1.0, skipped(t, f.reg, "sliding_window", skipInvalidBlockSize))

	// The endpoint's block size is still the one its stores showed.
	res = f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, wiretest.RemovedH(wiretest.H2)), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Removed: 1, RemovedBlocks: 1}, res)
	require.Equal(t, 1, f.match(testEndpoint, wiretest.TokensRange(1, 8), kvindex.KeyParams{}).Blocks)

	// At the bound, a tier-only store is still applied.
	offload.BlockSize = maxEngineBlockSize
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, offload), wire.FormatVLLM)
	require.Equal(t, 1.0, skipped(t, f.reg, "full_attention", skipInvalidBlockSize))
}

// An event of blocks larger than the index's, each mapped to several
// router blocks, may cover at most 2^24 tokens (its block count times the
// engine's block size, the bound token_ids have): a tier-only store or a
// removal carries no tokens, so before this bound 2^20 hashes at block
// size 65536 mapped to 2^32 router blocks. Such an event is skipped as
// too_many_tokens; one at the bound is applied.
func TestApplyBoundsTheTokensAMappedEventCovers(t *testing.T) {
	f := newApplyFixture(t)
	require.Equal(t, 1, f.applyBatch(testEndpoint, wiretest.WantV1(), wire.FormatVLLM).Stored)
	const E = maxEngineBlockSize
	hashes := func(n int) []uint64 {
		hs := make([]uint64, n)
		for i := range hs {
			hs[i] = wiretest.H2 + uint64(i) + 1000
		}
		return hs
	}
	atBound := wire.Event{Type: wire.EventBlockStored, BlockHashes: hashes(maxMappedTokens / E),
		BlockSize: E, Medium: "CPU", HasGroup: true, Kind: "full_attention"}
	f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, atBound), wire.FormatVLLM) // hashes the GPU never stored: skipped, but not for its size
	require.Zero(t, skipped(t, f.reg, "full_attention", skipTooManyTokens))
	over := atBound
	over.BlockHashes = hashes(maxMappedTokens/E + 1)
	res := f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, over), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Skipped: 1, SkippedBlocks: len(over.BlockHashes)}, res)
	require.Equal(t, 1.0, skipped(t, f.reg, "full_attention", skipTooManyTokens))

	// The endpoint's blocks are now E tokens long: a removal of more than
	// the bound's count is skipped too, and one within it applied.
	removal := wire.Event{Type: wire.EventBlockRemoved, BlockHashes: over.BlockHashes, Medium: "CPU"}
	res = f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, removal), wire.FormatVLLM)
	require.Equal(t, ApplyResult{Skipped: 1, SkippedBlocks: len(over.BlockHashes)}, res)
	require.Equal(t, 2.0, skipped(t, f.reg, "full_attention", skipTooManyTokens))
	removal.BlockHashes = atBound.BlockHashes
	res = f.applyBatch(testEndpoint, wiretest.BatchOf(0, true, removal), wire.FormatVLLM)
	require.Zero(t, res.Skipped, "%+v", res)
	require.Equal(t, 1, res.Removed)
}
