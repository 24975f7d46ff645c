package kvindex

import (
	"testing"
	"time"

	"github.com/kvroute/kvroute/telemetry"
	"github.com/stretchr/testify/require"
)

// newFakeClock is a virtual clock for speculative expiry.
func newFakeClock() *telemetry.Manual { return telemetry.NewManual(time.Unix(1_700_000_000, 0)) }

// testBS is the block size most tests use, small enough to read.
const testBS = 4

func newTestIndex(t *testing.T, cfg Config, opts ...Options) *Index {
	t.Helper()
	if cfg.BlockSize == 0 {
		cfg.BlockSize = testBS
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = -1
	}
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	ix, err := New(cfg, o)
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	return ix
}

// seq returns the token IDs from..from+n-1.
func seq(from, n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(from + i)
	}
	return t
}

// storeEv builds a GPU, group-0, full-attention store of len(tokens)/testBS
// blocks with engine hashes h, h+1, ….
func storeEv(model string, h uint64, tokens []uint32) *StoreEvent {
	n := len(tokens) / testBS
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = h + uint64(i)
	}
	return &StoreEvent{EngineHashes: hashes, Tokens: tokens, BlockSize: testBS, Model: model, Group: 0, Kind: "full_attention"}
}

func withParent(ev *StoreEvent, parent uint64) *StoreEvent {
	ev.HasParent, ev.ParentHash = true, parent
	return ev
}

// match returns Match's result for the request keys of tokens under model.
func match(ix *Index, model string, tokens []uint32, cands ...string) *MatchResult {
	var out MatchResult
	ix.Match(Keys(nil, tokens, ix.BlockSize(), &KeyParams{Model: model}), cands, &out)
	return &out
}

// blocksOf returns the contiguous block counts per candidate.
func blocksOf(r *MatchResult) []int {
	n := make([]int, len(r.Endpoints()))
	for i, e := range r.Endpoints() {
		n[i] = e.Blocks
	}
	return n
}
