package simengine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A decode engine given a prompt whose KV arrived by transfer computes only
// the last prompt token, reports the transferred full blocks in one
// BlockStored (GPU) like locally computed ones, and holds exactly the
// blocks a prefill engine that computed the same prompt holds.
func TestRemoteKVTokensSkipComputeAndPublishStoredBlocks(t *testing.T) {
	const bs = 16
	prompt := seqTokens(100, 10*bs+5)

	prefill, err := New(Config{BlockSize: bs, NumGPUBlocks: 64}, Options{})
	require.NoError(t, err)
	pres := run(t, prefill, Request{Prompt: prompt, MaxTokens: 1})
	held := prefill.CachedBlocks(Request{Prompt: prompt})
	require.Equal(t, u64s(chain(prompt, bs, "")), held, "the prefiller holds every full prompt block")

	rec := &recorder{}
	dec, err := New(Config{BlockSize: bs, NumGPUBlocks: 64, Sink: rec}, Options{})
	require.NoError(t, err)
	dres := run(t, dec, Request{Prompt: prompt, MaxTokens: 4, RemoteKVTokens: len(prompt)})
	require.Equal(t, 0, dres.CachedTokens)
	require.Equal(t, len(prompt)-1, dres.RemoteKVTokens, "the last prompt token is always computed")
	require.Less(t, dres.TTFT(), pres.TTFT(), "one token computed instead of the whole prompt")
	require.Equal(t, uint64(len(prompt)-1), dec.Stats().KVTransferTokens)
	require.Equal(t, uint64(0), dec.Stats().PrefixCacheHits, "transferred tokens are not local prefix-cache hits")

	ev := rec.events()
	require.NotEmpty(t, ev)
	require.Equal(t, BlockStored, ev[0].Type)
	require.Equal(t, MediumGPU, ev[0].Medium)
	require.Equal(t, held, ev[0].BlockHashes, "the transferred blocks, in one BlockStored")
	require.Equal(t, held, dec.CachedBlocks(Request{Prompt: prompt}))

	// A partial transfer (the prefiller lost the tail): the rest is computed.
	dec2, err := New(Config{BlockSize: bs, NumGPUBlocks: 64}, Options{})
	require.NoError(t, err)
	part := run(t, dec2, Request{Prompt: prompt, MaxTokens: 1, RemoteKVTokens: 3 * bs})
	require.Equal(t, 3*bs, part.RemoteKVTokens)
	require.Equal(t, u64s(chain(prompt, bs, "")), dec2.CachedBlocks(Request{Prompt: prompt}))
}

// Transferred tokens beyond a local hit add to it; fewer than the hit are
// ignored; a salted request's held blocks are keyed with its salt.
func TestRemoteKVTokensAfterLocalHitAndSaltedBlocks(t *testing.T) {
	const bs = 16
	prompt := seqTokens(7, 6*bs)
	e, err := New(Config{BlockSize: bs, NumGPUBlocks: 64}, Options{})
	require.NoError(t, err)
	run(t, e, Request{Prompt: prompt[:2*bs], MaxTokens: 1})
	r := run(t, e, Request{Prompt: prompt, MaxTokens: 1, RemoteKVTokens: bs})
	require.Equal(t, 2*bs, r.CachedTokens)
	require.Equal(t, 0, r.RemoteKVTokens, "a transfer shorter than the local hit adds nothing")

	other := seqTokens(500, 4*bs)
	run(t, e, Request{Prompt: other, MaxTokens: 1, CacheSalt: "s"})
	require.Empty(t, e.CachedBlocks(Request{Prompt: other}), "unsalted lookup misses salted blocks")
	require.Equal(t, u64s(chain(other, bs, "s")), e.CachedBlocks(Request{Prompt: other, CacheSalt: "s"}))
}

// A request waiting for its KV transfer counts as waiting ("deferred")
// until released, once.
func TestDeferCountsWaitingForTransfer(t *testing.T) {
	e, err := New(Config{}, Options{})
	require.NoError(t, err)
	d1, d2 := e.Defer(), e.Defer()
	require.Equal(t, 2, e.Stats().Deferred)
	d1()
	d1()
	require.Equal(t, 1, e.Stats().Deferred)
	d2()
	require.Equal(t, 0, e.Stats().Deferred)
}

// A finished request with HoldKV keeps its blocks in use (not evictable,
// not free) until ReleaseKV; then they are free and still cached.
func TestHoldKVKeepsBlocksUntilReleased(t *testing.T) {
	const bs = 4
	e, err := New(Config{BlockSize: bs, NumGPUBlocks: 8}, Options{})
	require.NoError(t, err)
	prompt := seqTokens(1, 6*bs)
	r := run(t, e, Request{Prompt: prompt, MaxTokens: 1, HoldKV: true})
	st := e.Stats()
	require.Equal(t, 1, st.HeldRequests)
	require.Equal(t, 6, st.HeldBlocks, "the six prompt blocks")
	require.Equal(t, 2, st.FreeBlocks)
	require.False(t, e.ResetPrefixCache(), "held blocks are in use")

	// A request needing more than the two free blocks waits for the release.
	var done *Result
	_, err = e.Submit(Request{Prompt: seqTokens(900, 3*bs), MaxTokens: 1, OnDone: func(x Result) { done = &x }})
	require.NoError(t, err)
	e.RunUntilIdle()
	require.Nil(t, done, "no blocks until the held ones are released")
	require.True(t, e.ReleaseKV(r.ID))
	require.False(t, e.ReleaseKV(r.ID))
	e.RunUntilIdle()
	require.NotNil(t, done)
	require.Equal(t, 0, e.Stats().HeldBlocks)
	require.NotEmpty(t, e.CachedBlocks(Request{Prompt: prompt}), "released blocks stay cached until reused")
}
