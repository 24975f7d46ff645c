package simengine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A group stores again a block it holds already when the request computes
// it anew, as vLLM's block pool does not de-duplicate (every block past a
// request's hit is a new one, cached and stored by cache_full_blocks):
// here the window group lost block 4, which cuts the hit to 4 blocks, and
// the request's blocks 4 and 5 are stored again by every group, block 5
// becoming a second copy in the window group, which a removal of one copy
// leaves held.
func TestHybridGroupStoresAgainABlockItRecomputes(t *testing.T) {
	e, rec := newTestEngine(t, Config{NumGPUBlocks: 64, DecodeStep: 1, PrefillTokensPerSecond: 1e6,
		Hybrid: &HybridConfig{SlidingWindow: 6}})
	p := seqTokens(3, 6*4+1)
	run(t, e, Request{Prompt: p, MaxTokens: 1})
	all := rec.take()
	e.mu.Lock()
	bs, parent := e.cfg.BlockSize, NoneHash
	var hashes []uint64
	var k4 gkey
	for i := 0; i < 6; i++ {
		parent = e.hasher.hash(parent, p[i*bs:(i+1)*bs], nil)
		hashes = append(hashes, parent.U64())
		if i == 4 {
			k4 = gkey{e.hy.swa[0].group, parent}
		}
	}
	dropCached(t, e.pool, k4)
	e.mu.Unlock()
	all = append(all, Event{Type: BlockRemoved, BlockHashes: []uint64{hashes[4]}, GroupIdx: 1})
	require.Equal(t, 4*4, e.CachedTokens(p))

	r := run(t, e, Request{Prompt: p, MaxTokens: 1})
	require.Equal(t, 4*4, r.CachedTokens)
	events := rec.take()
	stores := map[int][][]uint64{}
	for _, ev := range events {
		if ev.Type == BlockStored {
			stores[ev.GroupIdx] = append(stores[ev.GroupIdx], ev.BlockHashes)
		}
	}
	require.Equal(t, [][]uint64{hashes[4:6]}, stores[0], "full attention stores blocks 4 and 5 again")
	require.Equal(t, [][]uint64{hashes[4:6]}, stores[1], "so does the window group, which held block 5")
	all = append(all, events...)
	require.Equal(t, 2, held(e, e.hy.swa[0])[hashes[5]])
	require.Equal(t, held(e, e.hy.swa[0]), groupResidency(all)[1])
}
