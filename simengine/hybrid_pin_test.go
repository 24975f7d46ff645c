package simengine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A running request holds its blocks in the window and Mamba groups as it
// does in full attention (vLLM's coordinator allocates them in every
// group at once, ref counted): another request's allocations, here more
// than the pool's never-used blocks, evict cached free blocks of every
// group but none that a still needs (its full-attention blocks, its
// window's block 3), and every block is free once both are done.
func TestHybridRunningRequestsHoldTheirGroupBlocks(t *testing.T) {
	e, rec := newTestEngine(t, Config{NumGPUBlocks: 46, DecodeStep: 1, PrefillTokensPerSecond: 1e6,
		Hybrid: &HybridConfig{SlidingWindow: 6, Mamba: true}})
	a := seqTokens(1, 4*4+1)
	_, err := e.Submit(Request{Prompt: a, MaxTokens: 2})
	require.NoError(t, err)
	_, err = e.Submit(Request{Prompt: seqTokens(500, 10*4+1), MaxTokens: 1})
	require.NoError(t, err)
	e.RunUntilIdle()
	ha := chain(a, 4, "")
	removals := 0
	for _, ev := range rec.take() {
		if ev.Type != BlockRemoved {
			continue
		}
		removals++
		switch ev.GroupIdx {
		case 0:
			require.NotContains(t, u64s(ha), ev.BlockHashes[0], "full attention evicted a block a held")
		case 1:
			require.NotEqual(t, ha[3].U64(), ev.BlockHashes[0], "the window group evicted a block of a's window while a ran")
		}
	}
	require.NotZero(t, removals, "the second request evicted cached blocks")
	requireNoGroupBlockHeld(t, e)
}

// requireNoGroupBlockHeld checks that an idle engine's pool holds no
// block for a request, in any group: every block is free.
func requireNoGroupBlockHeld(t *testing.T, e *Engine) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	require.Equal(t, e.pool.usable, e.pool.free, "every block free")
	for b, k := range e.pool.hash {
		if e.pool.hashed[b] {
			require.Zero(t, e.pool.ref[b], "group %d block %x", k.group, k.d.U64())
		}
	}
}

// A group's removals in a step precede its stores: an allocation evicts
// a free block before the store of the new one (vLLM's get_new_blocks
// before cache_full_blocks), and never a block a running request holds,
// so no step removes a block it stored, even when a request stores more
// blocks than the group keeps.
func TestHybridStepNeverRemovesABlockItStored(t *testing.T) {
	e, rec := newTestEngine(t, Config{NumGPUBlocks: 64, DecodeStep: 1, PrefillTokensPerSecond: 1e6,
		Hybrid: &HybridConfig{SlidingWindow: 6, Mamba: true}})
	var all []Event
	removals := 0
	for i, n := range []int{5 * 4, 2 * 4, 7 * 4, 3 * 4, 5 * 4} {
		run(t, e, Request{Prompt: seqTokens(1000*(i%3), n+1), MaxTokens: 3})
		for _, b := range rec.batches {
			type key struct {
				group int
				h     uint64
			}
			stored := map[key]bool{}
			for _, ev := range b.Events {
				for _, h := range ev.BlockHashes {
					k := key{ev.GroupIdx, h}
					switch {
					case ev.Type == BlockStored:
						stored[k] = true
					case ev.Type == BlockRemoved && ev.GroupIdx != 0:
						removals++
						require.False(t, stored[k], "request %d: group %d removed %x in the step that stored it", i, ev.GroupIdx, h)
					}
				}
			}
		}
		all = append(all, rec.take()...)
		got := groupResidency(all)
		require.Equal(t, held(e, e.hy.swa[0]), got[1], "request %d: sliding-window group", i)
		require.Equal(t, held(e, e.hy.mamba), got[2], "request %d: Mamba group", i)
		requireNoGroupBlockHeld(t, e)
	}
	require.NotZero(t, removals, "the groups evicted blocks")
}

// A running request frees the blocks a group no longer needs as it
// advances, as vLLM's remove_skipped_blocks does each step: the window
// group's blocks before the last W−1 tokens and the Mamba group's states
// before the last one, which another request's allocation may then evict
// while the request still runs; what it still needs stays.
func TestHybridRunningRequestFreesBlocksItNoLongerNeeds(t *testing.T) {
	e, rec := newTestEngine(t, Config{NumGPUBlocks: 32, DecodeStep: 1, PrefillTokensPerSecond: 1e6,
		Hybrid: &HybridConfig{SlidingWindow: 6, Mamba: true}})
	a := seqTokens(1, 3*4+1)
	tokens, r2Done := 0, false
	_, err := e.Submit(Request{Prompt: a, MaxTokens: 20, OnToken: func(TokenEvent) { tokens++ }})
	require.NoError(t, err)
	submitted := false
	for !r2Done {
		next, ok := e.NextEventTime()
		require.True(t, ok, "the engine idled before the second request finished")
		e.AdvanceTo(next)
		if tokens == 8 && !submitted {
			// a has computed 20 tokens: the window needs blocks 3 and 4
			// (tokens 15 on), Mamba the state in block 4.
			submitted = true
			_, err := e.Submit(Request{Prompt: seqTokens(500, 6*4+1), MaxTokens: 1,
				OnDone: func(Result) { r2Done = true }})
			require.NoError(t, err)
		}
	}
	require.Less(t, tokens, 20, "a still runs")
	ha := chain(a, 4, "")
	removed := map[int][]uint64{}
	for _, ev := range rec.take() {
		if ev.Type == BlockRemoved {
			removed[ev.GroupIdx] = append(removed[ev.GroupIdx], ev.BlockHashes[0])
		}
	}
	for _, g := range []int{1, 2} {
		require.Contains(t, removed[g], ha[0].U64(), "group %d evicted a's block 0, which a no longer needs", g)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.running[0]
	for gi, g := range e.hy.groups {
		for j, b := range s.gblocks[gi] {
			lo := e.hy.skippedBlocks(g, s.computed, 4)
			require.Equal(t, j >= lo, b >= 0, "group %d block %d: held only while needed", g.group, j)
			if b >= 0 {
				require.Positive(t, e.pool.ref[b])
			}
		}
	}
}

// A prefill engine's request held for a KV transfer (Request.HoldKV)
// keeps its blocks in every group until ReleaseKV, as vLLM's delayed free
// keeps all of a request's blocks.
func TestHybridHeldRequestKeepsItsGroupBlocks(t *testing.T) {
	e, _ := newTestEngine(t, Config{NumGPUBlocks: 64, DecodeStep: 1, PrefillTokensPerSecond: 1e6,
		Hybrid: &HybridConfig{SlidingWindow: 6, Mamba: true}})
	r := run(t, e, Request{Prompt: seqTokens(1, 4*4+1), MaxTokens: 1, HoldKV: true})
	e.mu.Lock()
	for gi, g := range e.hy.groups {
		n := 0
		for _, b := range e.hy.held[r.ID][gi] {
			if b >= 0 {
				require.Positive(t, e.pool.ref[b])
				n++
			}
		}
		require.Positive(t, n, "group %d holds the request's blocks", g.group)
	}
	e.mu.Unlock()
	require.True(t, e.ReleaseKV(r.ID))
	requireNoGroupBlockHeld(t, e)
}
