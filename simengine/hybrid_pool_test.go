package simengine

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// groupRemoval is a BlockRemoved's group and hash.
type groupRemoval struct {
	group int
	hash  uint64
}

// Every group allocates from one pool with one free queue, as vLLM's
// groups share their coordinator's BlockPool: an allocation evicts the
// least recently freed cached block whatever its group. a's window frees
// blocks 2, 1 and 0 while a decodes (tail first), then a's full-attention
// and window blocks at its end; b's full-attention allocations take the
// 6 never-used blocks and then a's window block 2, and b's window
// allocations a's window blocks 1 and 0 and then a's full-attention
// blocks, though full attention alone never held more than 12 of the 16.
func TestHybridGroupsEvictFromOneFreeQueue(t *testing.T) {
	e, rec := newTestEngine(t, Config{NumGPUBlocks: 16, DecodeStep: 1, PrefillTokensPerSecond: 1e6,
		Hybrid: &HybridConfig{SlidingWindow: 6}})
	a := seqTokens(1, 4*4+1)
	run(t, e, Request{Prompt: a, MaxTokens: 2})
	rec.take()
	run(t, e, Request{Prompt: seqTokens(500, 6*4+1), MaxTokens: 1})
	var got []groupRemoval
	for _, ev := range rec.take() {
		if ev.Type == BlockRemoved {
			got = append(got, groupRemoval{ev.GroupIdx, ev.BlockHashes[0]})
		}
	}
	ha := u64s(chain(a, 4, ""))
	require.Equal(t, []groupRemoval{{1, ha[2]}, {1, ha[1]}, {1, ha[0]}, {0, ha[3]}, {0, ha[2]}, {0, ha[1]}, {0, ha[0]}}, got)
	require.Zero(t, e.CachedTokens(a), "full attention lost a's blocks to the window group's allocations")
}

// A request is admitted only when the pool can give every group its
// blocks for the step, as vLLM's allocate_slots returns None otherwise: b's
// 7 full-attention blocks fit beside running a, but not with its 7 window
// blocks, so b waits, without preempting a, until a is done.
func TestHybridRequestWaitsForEveryGroupsBlocks(t *testing.T) {
	e, _ := newTestEngine(t, Config{NumGPUBlocks: 16, DecodeStep: 1, PrefillTokensPerSecond: 1e6,
		Hybrid: &HybridConfig{SlidingWindow: 6}})
	var ra, rb Result
	_, err := e.Submit(Request{Prompt: seqTokens(1, 4*4+1), MaxTokens: 6, OnDone: func(r Result) { ra = r }})
	require.NoError(t, err)
	next, ok := e.NextEventTime()
	require.True(t, ok)
	e.AdvanceTo(next) // a's prefill is in flight
	_, err = e.Submit(Request{Prompt: seqTokens(500, 6*4+1), MaxTokens: 1, OnDone: func(r Result) { rb = r }})
	require.NoError(t, err)
	waited := false
	for rb.ID == 0 {
		next, ok := e.NextEventTime()
		require.True(t, ok, "the engine idled with b waiting")
		e.AdvanceTo(next)
		st := e.Stats()
		if ra.ID == 0 {
			require.Less(t, st.NumBlocks-st.FreeBlocks, 12, "a holds fewer than 12 blocks: b's full-attention ones would fit")
			waited = waited || st.Waiting == 1
		}
	}
	require.True(t, waited, "b waited while a ran")
	require.NotZero(t, ra.ID)
	require.False(t, rb.FirstToken.Before(ra.Finish), "b ran only once a was done")
	require.Zero(t, e.Stats().Preemptions)
	requireNoGroupBlockHeld(t, e)
}

// A request whose groups together could never fit in the pool, even
// alone, is refused at once (and counted), not left waiting forever.
func TestHybridRefusesARequestItsGroupsCannotHold(t *testing.T) {
	e, _ := newTestEngine(t, Config{NumGPUBlocks: 16, Hybrid: &HybridConfig{SlidingWindow: 6}})
	_, err := e.Submit(Request{Prompt: seqTokens(1, 9*4), MaxTokens: 1})
	require.ErrorIs(t, err, ErrTooLong, "10 full-attention blocks fit, not with 10 window ones")
	require.EqualValues(t, 1, e.Stats().RequestRejected)
}

// vllm:kv_cache_usage_perc counts the blocks of every group, as vLLM's
// BlockPool.get_usage counts the one pool they share: a's prefill holds 5
// full-attention and 5 window blocks of 20.
func TestHybridKVCacheUsageCountsEveryGroup(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := New(Config{Model: "m", BlockSize: 4, NumGPUBlocks: 20, DecodeStep: 1, PrefillTokensPerSecond: 1e6,
		Hybrid: &HybridConfig{SlidingWindow: 6}}, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	_, err = e.Submit(Request{Prompt: seqTokens(1, 4*4+1), MaxTokens: 3})
	require.NoError(t, err)
	next, ok := e.NextEventTime()
	require.True(t, ok)
	e.AdvanceTo(next) // the prefill step is in flight
	require.InDelta(t, 10.0/20, kvUsage(t, reg), 1e-9)
	e.RunUntilIdle()
	require.Zero(t, kvUsage(t, reg))
}

// The per-group capacities of separate group caches are refused: every
// group allocates from the one pool of NumGPUBlocks blocks.
func TestHybridRefusesGroupCapacities(t *testing.T) {
	for _, h := range []HybridConfig{
		{SlidingWindow: 8, WindowBlocks: 16},
		{SlidingWindow: 8, Mamba: true, MambaStates: 16},
	} {
		_, err := New(Config{Hybrid: &h}, Options{})
		require.ErrorIs(t, err, ErrBadConfig)
		require.ErrorContains(t, err, "numGPUBlocks")
	}
}
