package simengine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// groupResidency folds events the way a subscriber's index does: per
// group_idx, a store adds its hashes, a removal takes one back (a hash not
// held is ignored), a reset empties everything.
func groupResidency(events []Event) map[int]map[uint64]int {
	out := map[int]map[uint64]int{}
	for _, ev := range events {
		g := out[ev.GroupIdx]
		if g == nil {
			g = map[uint64]int{}
			out[ev.GroupIdx] = g
		}
		switch ev.Type {
		case BlockStored:
			for _, h := range ev.BlockHashes {
				g[h]++
			}
		case BlockRemoved:
			for _, h := range ev.BlockHashes {
				if g[h] > 1 {
					g[h]--
				} else {
					delete(g, h)
				}
			}
		case AllBlocksCleared:
			clear(out)
		}
	}
	return out
}

// held returns what a sliding-window or Mamba group holds: the copies of
// each of its blocks the engine's pool caches.
func held(e *Engine, g *cacheGroup) map[uint64]int {
	out := map[uint64]int{}
	p := e.pool
	for b := range p.hash {
		if p.hashed[b] && p.hash[b].group == g.group {
			out[p.hash[b].d.U64()]++
		}
	}
	return out
}

// dropCached makes pool p lose its only copy of k, a free block, as an
// eviction would, without an event.
func dropCached(t *testing.T, p *blockPool, k gkey) {
	t.Helper()
	b, ok := p.lookup(k)
	require.True(t, ok)
	require.Negative(t, p.chain[b], "one copy")
	require.Zero(t, p.ref[b], "no request holds it")
	p.uncache(b)
}

// The sliding-window and Mamba groups' events tell a subscriber exactly
// what each group holds, even when a store adds more blocks than the group
// keeps, so that a block it adds is evicted again by the same store.
func TestHybridGroupEventsMatchTheGroups(t *testing.T) {
	e, rec := newTestEngine(t, Config{NumGPUBlocks: 64, DecodeStep: 1, PrefillTokensPerSecond: 1e6,
		Hybrid: &HybridConfig{SlidingWindow: 6, Mamba: true}})
	var all []Event
	for i, n := range []int{5 * 4, 2 * 4, 7 * 4, 3 * 4, 5 * 4} {
		run(t, e, Request{Prompt: seqTokens(1000*(i%3), n+1), MaxTokens: 1})
		all = append(all, rec.take()...)
		got := groupResidency(all)
		require.Equal(t, held(e, e.hy.swa[0]), got[1], "request %d: sliding-window group", i)
		require.Equal(t, held(e, e.hy.mamba), got[2], "request %d: Mamba group", i)
	}
}

// A prefix lookup that does not admit its request leaves the window and
// Mamba groups' LRU order alone, as vLLM's find_longest_cache_hit only
// reads the cache (blocks are touched when allocate_slots admits the
// request): a request waiting for KV blocks, retried every step, does not
// keep its prefix's window blocks from being evicted.
func TestHybridFailedAdmissionDoesNotRefreshTheGroups(t *testing.T) {
	e, rec := newTestEngine(t, Config{NumGPUBlocks: 18, DecodeStep: 1, PrefillTokensPerSecond: 1e6,
		Hybrid: &HybridConfig{SlidingWindow: 5}})
	p := seqTokens(1, 8)
	run(t, e, Request{Prompt: p, MaxTokens: 1})                 // p0 p1
	run(t, e, Request{Prompt: seqTokens(100, 8), MaxTokens: 1}) // q0 q1
	rec.take()
	// r1 holds 5 blocks in each group and decodes into 2 more, storing r5
	// and r6 on the way; r2 shares p's two blocks but needs 17 of the pool
	// the groups share, more than are free, so it waits, its lookup
	// retried every step, until r1 is done.
	var r2 Result
	_, err := e.Submit(Request{Prompt: seqTokens(200, 20), MaxTokens: 9})
	require.NoError(t, err)
	_, err = e.Submit(Request{Prompt: append(append([]uint32{}, p...), seqTokens(300, 24)...), MaxTokens: 1,
		OnDone: func(r Result) { r2 = r }})
	require.NoError(t, err)
	e.RunUntilIdle()
	hp := chain(p, 4, "")
	var removed []uint64
	for _, ev := range rec.take() {
		if ev.Type == BlockRemoved && ev.GroupIdx == 1 {
			removed = append(removed, ev.BlockHashes[0])
		}
	}
	require.Contains(t, removed, hp[1].U64(), "p1 aged out of the window group while r2 waited")
	require.Zero(t, r2.CachedTokens, "the window group no longer serves p's prefix")
}

// blockRecord is what a BlockStored tells of one of its blocks.
type blockRecord struct {
	parent    uint64
	hasParent bool
	tokens    []uint32
	keys      []ExtraKey
}

// storedBlocks splits a store into its blocks' records, keyed by hash.
func storedBlocks(t *testing.T, ev Event) map[uint64]blockRecord {
	t.Helper()
	n := len(ev.BlockHashes)
	require.Len(t, ev.TokenIDs, n*ev.BlockSize, "group %d store: tokens of every block", ev.GroupIdx)
	require.Len(t, ev.ExtraKeys, n, "group %d store: extra keys of every block", ev.GroupIdx)
	out := make(map[uint64]blockRecord, n)
	parent, has := ev.ParentHash, ev.HasParent
	for i, h := range ev.BlockHashes {
		out[h] = blockRecord{parent: parent, hasParent: has,
			tokens: ev.TokenIDs[i*ev.BlockSize : (i+1)*ev.BlockSize], keys: ev.ExtraKeys[i]}
		parent, has = h, true
	}
	return out
}

// A sliding-window or Mamba group's store carries, as vLLM's
// cache_full_blocks does for every group, the parent block hash, the
// blocks' token IDs and their extra keys, so that a subscriber that keys
// blocks by their tokens (or checks their hashes) can read every group's
// stores the same way; they equal what the full-attention store said of
// the same blocks.
func TestHybridGroupStoresCarryParentTokensAndKeys(t *testing.T) {
	e, rec := newTestEngine(t, Config{NumGPUBlocks: 64, DecodeStep: 1, PrefillTokensPerSecond: 1e6,
		Hybrid: &HybridConfig{SlidingWindow: 6, Mamba: true}})
	full := map[uint64]blockRecord{}
	groups := 0
	for i, n := range []int{5 * 4, 2 * 4, 7 * 4, 3 * 4, 5 * 4} {
		run(t, e, Request{Prompt: seqTokens(1000*(i%3), n+1), MaxTokens: 1, CacheSalt: "tenant"})
		for _, ev := range rec.take() {
			if ev.Type != BlockStored {
				continue
			}
			blocks := storedBlocks(t, ev)
			if ev.GroupIdx == 0 {
				for h, b := range blocks {
					full[h] = b
				}
				continue
			}
			groups++
			for h, b := range blocks {
				require.Contains(t, full, h, "request %d: group %d stores a block full attention never did", i, ev.GroupIdx)
				require.Equal(t, full[h], b, "request %d: group %d block %x", i, ev.GroupIdx, h)
			}
		}
	}
	require.NotZero(t, groups)
}
