package simengine

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder is an EventSink that keeps every batch.
type recorder struct{ batches []EventBatch }

func (r *recorder) PublishKVEvents(b EventBatch) { r.batches = append(r.batches, b) }

func (r *recorder) events() []Event {
	var out []Event
	for _, b := range r.batches {
		out = append(out, b.Events...)
	}
	return out
}

func (r *recorder) take() []Event {
	ev := r.events()
	r.batches = nil
	return ev
}

func seqTokens(from, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}

// chain returns the digests of the full blocks of tokens.
func chain(tokens []uint32, bs int, salt string) []Digest {
	var out []Digest
	parent := NoneHash
	for i := 0; (i+1)*bs <= len(tokens); i++ {
		var keys []string
		if i == 0 && salt != "" {
			keys = []string{salt}
		}
		parent = HashBlock(parent, tokens[i*bs:(i+1)*bs], keys)
		out = append(out, parent)
	}
	return out
}

func u64s(ds []Digest) []uint64 {
	out := make([]uint64, len(ds))
	for i, d := range ds {
		out[i] = d.U64()
	}
	return out
}

func newTestEngine(t *testing.T, cfg Config) (*Engine, *recorder) {
	t.Helper()
	rec := &recorder{}
	if cfg.BlockSize == 0 {
		cfg.BlockSize = 4
	}
	cfg.Sink = rec
	e, err := New(cfg, Options{})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e, rec
}

// run submits r and runs the virtual clock until idle, returning its result.
func run(t *testing.T, e *Engine, r Request) Result {
	t.Helper()
	var res *Result
	r.OnDone = func(x Result) { res = &x }
	_, err := e.Submit(r)
	require.NoError(t, err)
	e.RunUntilIdle()
	require.NotNil(t, res)
	return *res
}

func TestPrefillStoresFullBlocks(t *testing.T) {
	e, rec := newTestEngine(t, Config{})
	prompt := seqTokens(1, 10)
	res := run(t, e, Request{Prompt: prompt, MaxTokens: 1})
	require.NoError(t, res.Err)
	require.Equal(t, FinishLength, res.FinishReason)

	ev := rec.events()
	require.Len(t, ev, 1)
	require.Equal(t, Event{
		Type: BlockStored, BlockHashes: u64s(chain(prompt, 4, "")), TokenIDs: prompt[:8], BlockSize: 4,
		Medium: MediumGPU, ExtraKeys: [][]ExtraKey{nil, nil}, GroupIdx: 0, Kind: KindFullAttention,
	}, ev[0])
	// The two full blocks, [1,2,3,4] and [5,6,7,8], carry vLLM's own
	// sha256_cbor hashes.
	require.Equal(t, []uint64{9561501211280363793, 15292913576410714033}, ev[0].BlockHashes)

	st := e.Stats()
	require.Equal(t, uint64(10), st.PrefixCacheQueries)
	require.Equal(t, uint64(0), st.PrefixCacheHits)
	require.Equal(t, uint64(1), st.RequestSuccess)
	require.Equal(t, 2, st.CachedBlocks)
	require.Equal(t, st.NumBlocks, st.FreeBlocks)
}

func TestDecodeStoresBlocksWithGeneratedTokens(t *testing.T) {
	e, rec := newTestEngine(t, Config{})
	prompt := seqTokens(1, 6)
	res := run(t, e, Request{Prompt: prompt, MaxTokens: 4})
	require.Len(t, res.OutputTokens, 4)

	ev := rec.events()
	require.Len(t, ev, 2, "block 0 at prefill, block 1 once two generated tokens are computed")
	all := append(append([]uint32{}, prompt...), res.OutputTokens...)
	hashes := chain(all, 4, "")
	require.Equal(t, []uint64{hashes[0].U64()}, ev[0].BlockHashes)
	require.False(t, ev[0].HasParent)
	require.Equal(t, []uint64{hashes[1].U64()}, ev[1].BlockHashes)
	require.True(t, ev[1].HasParent)
	require.Equal(t, hashes[0].U64(), ev[1].ParentHash)
	require.Equal(t, all[4:8], ev[1].TokenIDs)
	require.Equal(t, res.OutputTokens[:2], ev[1].TokenIDs[2:])
	require.Len(t, rec.batches, 2, "one batch per step that produced events")
}

func TestPrefixHitEmitsNothing(t *testing.T) {
	e, rec := newTestEngine(t, Config{})
	prompt := seqTokens(100, 10)
	first := run(t, e, Request{Prompt: prompt, MaxTokens: 1})
	require.Len(t, rec.take(), 1)

	second := run(t, e, Request{Prompt: prompt, MaxTokens: 1})
	require.Empty(t, rec.events(), "a prefix-cache hit emits no event")
	require.Equal(t, 8, second.CachedTokens)
	require.Less(t, second.TTFT(), first.TTFT())

	st := e.Stats()
	require.Equal(t, uint64(20), st.PrefixCacheQueries)
	require.Equal(t, uint64(8), st.PrefixCacheHits)
}

func TestHitCappedBeforeLastToken(t *testing.T) {
	e, rec := newTestEngine(t, Config{})
	prompt := seqTokens(7, 8) // exactly two blocks
	run(t, e, Request{Prompt: prompt, MaxTokens: 1})
	rec.take()
	res := run(t, e, Request{Prompt: prompt, MaxTokens: 1})
	// vLLM recomputes the last prompt token: floor((8-1)/4)*4 = 4 cached tokens,
	// and block 1 is computed (and announced) again in a new block.
	require.Equal(t, 4, res.CachedTokens)
	require.Equal(t, uint64(4), e.Stats().PrefixCacheHits)
	ev := rec.events()
	require.Len(t, ev, 1)
	h := chain(prompt, 4, "")
	require.Equal(t, []uint64{h[1].U64()}, ev[0].BlockHashes)
	require.Equal(t, h[0].U64(), ev[0].ParentHash)
}

func TestLazyEvictionEmitsBlockRemoved(t *testing.T) {
	e, rec := newTestEngine(t, Config{NumGPUBlocks: 4})
	a := seqTokens(1, 8)
	run(t, e, Request{Prompt: a, MaxTokens: 1})
	rec.take()
	ha := chain(a, 4, "")
	require.Equal(t, 2, e.Stats().CachedBlocks, "finished requests keep their blocks cached")

	// B needs 3 blocks: the 2 never-used ones, then the least recently freed.
	// A's blocks were freed tail first, so A's block 1 goes before block 0.
	b := seqTokens(50, 12)
	run(t, e, Request{Prompt: b, MaxTokens: 1})
	ev := rec.events()
	require.Len(t, ev, 2)
	require.Equal(t, Event{Type: BlockRemoved, BlockHashes: []uint64{ha[1].U64()}, Medium: MediumGPU}, ev[0])
	require.Equal(t, BlockStored, ev[1].Type)
	require.Equal(t, u64s(chain(b, 4, "")), ev[1].BlockHashes)
	require.Equal(t, 4, e.Stats().CachedBlocks)

	// A's block 0 is still cached: a request sharing it hits one block.
	res := run(t, e, Request{Prompt: append(seqTokens(1, 4), 99, 98), MaxTokens: 1})
	require.Equal(t, 4, res.CachedTokens)
}

func TestResetPrefixCache(t *testing.T) {
	e, rec := newTestEngine(t, Config{})
	prompt := seqTokens(1, 9)
	_, err := e.Submit(Request{Prompt: prompt, MaxTokens: 3})
	require.NoError(t, err)
	e.AdvanceTo(e.Now()) // first step in flight: blocks in use
	require.False(t, e.ResetPrefixCache(), "reset fails while blocks are in use")
	e.RunUntilIdle()
	rec.take()

	require.True(t, e.ResetPrefixCache())
	e.RunUntilIdle()
	require.Equal(t, []Event{{Type: AllBlocksCleared}}, rec.take())
	require.Equal(t, 0, e.Stats().CachedBlocks)

	res := run(t, e, Request{Prompt: prompt, MaxTokens: 1})
	require.Zero(t, res.CachedTokens, "nothing is cached after a reset")
	require.Len(t, rec.events(), 1)
}

func TestCacheSaltAndLoRAKeys(t *testing.T) {
	e, rec := newTestEngine(t, Config{})
	prompt := seqTokens(1, 8)
	run(t, e, Request{Prompt: prompt, MaxTokens: 1, CacheSalt: "salt-A"})
	ev := rec.take()
	require.Equal(t, [][]ExtraKey{{{Value: "salt-A"}}, nil}, ev[0].ExtraKeys)
	require.Equal(t, uint64(1858029805988556374), ev[0].BlockHashes[0], "vLLM's hash of block [1,2,3,4] salted with salt-A")

	// Unsalted traffic does not hit salted blocks.
	res := run(t, e, Request{Prompt: prompt, MaxTokens: 1})
	require.Zero(t, res.CachedTokens)
	rec.take()

	run(t, e, Request{Prompt: prompt, MaxTokens: 1, LoRAName: "my-lora", LoRAID: 7, CacheSalt: "s"})
	ev = rec.take()
	require.Equal(t, [][]ExtraKey{{{Value: "my-lora"}, {Value: "s"}}, {{Value: "my-lora"}}}, ev[0].ExtraKeys)
	require.Equal(t, "my-lora", ev[0].LoRAName)
	require.Equal(t, 7, ev[0].LoRAID)
	h0 := HashBlock(NoneHash, prompt[:4], []string{"my-lora", "s"})
	require.Equal(t, h0.U64(), ev[0].BlockHashes[0])
}

func TestSubmitRejectsBadInput(t *testing.T) {
	e, _ := newTestEngine(t, Config{NumGPUBlocks: 2})
	_, err := e.Submit(Request{MaxTokens: 1})
	require.ErrorIs(t, err, ErrEmptyPrompt)
	_, err = e.Submit(Request{Prompt: []uint32{1}, MaxTokens: 0})
	require.ErrorIs(t, err, ErrMaxTokens)
	_, err = e.Submit(Request{Prompt: seqTokens(1, 8), MaxTokens: 1})
	require.ErrorIs(t, err, ErrTooLong)
	// A max_tokens whose sum with the prompt overflows int is too long too,
	// not a panic allocating the request's token slice.
	for _, n := range []int{math.MaxInt, math.MaxInt - 2} {
		_, err = e.Submit(Request{Prompt: seqTokens(1, 3), MaxTokens: n})
		require.ErrorIs(t, err, ErrTooLong, "max_tokens %d", n)
	}
	require.Equal(t, uint64(5), e.Stats().RequestRejected)
	e.Close()
	_, err = e.Submit(Request{Prompt: []uint32{1}, MaxTokens: 1})
	require.ErrorIs(t, err, ErrClosed)

	_, err = New(Config{BlockSize: -1}, Options{})
	require.ErrorIs(t, err, ErrBadConfig)
	_, err = New(Config{TimeScale: -1}, Options{})
	require.ErrorIs(t, err, ErrBadConfig)
}

func TestAbort(t *testing.T) {
	e, _ := newTestEngine(t, Config{})
	var got []Result
	id, err := e.Submit(Request{Prompt: seqTokens(1, 9), MaxTokens: 50, OnDone: func(r Result) { got = append(got, r) }})
	require.NoError(t, err)
	e.AdvanceTo(e.Now().Add(50 * time.Millisecond))
	require.True(t, e.Abort(id))
	require.False(t, e.Abort(id))
	e.RunUntilIdle()
	require.Len(t, got, 1)
	require.ErrorIs(t, got[0].Err, ErrAborted)
	require.Equal(t, FinishAbort, got[0].FinishReason)
	st := e.Stats()
	require.Equal(t, uint64(1), st.RequestAborted)
	require.Zero(t, st.RequestSuccess)
	require.Zero(t, st.Running)
	require.Equal(t, st.NumBlocks, st.FreeBlocks)
}

// A multi-turn conversation that sends the answer back hits the decode blocks
// of the first turn, because generated text re-tokenizes to the generated IDs.
func TestMultiTurnHitsDecodeBlocks(t *testing.T) {
	e, _ := newTestEngine(t, Config{})
	turn1, err := ApplyChatTemplate(nil, []Message{{"user", "What is a KV cache?"}}, "", true)
	require.NoError(t, err)
	r1 := run(t, e, Request{Prompt: turn1, MaxTokens: 12})
	turn2, err := ApplyChatTemplate(nil, []Message{{"user", "What is a KV cache?"}, {"assistant", r1.Text}, {"user", "And a block?"}}, "", true)
	require.NoError(t, err)
	require.Equal(t, append(slices.Clone(turn1), r1.OutputTokens...), turn2[:len(turn1)+12])
	r2 := run(t, e, Request{Prompt: turn2, MaxTokens: 1})
	// Computed KV of turn 1: the prompt and 11 of the 12 outputs.
	require.Equal(t, (len(turn1)+11)/4*4, r2.CachedTokens)
}

// A reset that succeeds while a step is in flight (its only request was
// aborted, so no block is in use) clears the blocks that step cached: the
// subscriber must see that step's BlockStored before AllBlocksCleared, as
// vLLM queues both in its KV-event queue and publishes them in that order.
// The reverse order leaves a router indexing blocks the engine dropped.
func TestResetDuringStepClearsAfterTheStepsStores(t *testing.T) {
	e, rec := newTestEngine(t, Config{})
	id, err := e.Submit(Request{Prompt: seqTokens(1, 9), MaxTokens: 3})
	require.NoError(t, err)
	e.AdvanceTo(e.Now()) // the prefill step is in flight; it cached two blocks
	require.True(t, e.Abort(id))
	require.True(t, e.ResetPrefixCache(), "nothing holds blocks after the abort")
	e.RunUntilIdle()
	ev := rec.take()
	require.Len(t, ev, 2)
	require.Equal(t, BlockStored, ev[0].Type)
	require.Equal(t, AllBlocksCleared, ev[1].Type, "the clear comes after the stores it clears")
	require.Zero(t, e.Stats().CachedBlocks)
	res := run(t, e, Request{Prompt: seqTokens(1, 9), MaxTokens: 1})
	require.Zero(t, res.CachedTokens)
}

// When two blocks hold copies of one hash (two requests computed it
// concurrently), a prefix hit takes the copy cached first, as vLLM's
// BlockPool.get_cached_block returns the first of the duplicates; the
// other copy stays where it is in the free queue and is evicted (with its
// BlockRemoved) when the LRU order reaches it.
func TestPrefixHitTakesTheFirstCachedCopy(t *testing.T) {
	p := newBlockPool(4, false)
	d := gkey{0, HashBlock(NoneHash, seqTokens(1, 4), nil)}
	a, _, _ := p.allocate()
	b, _, _ := p.allocate()
	p.cache(a, d)
	p.cache(b, d)
	got, ok := p.lookup(d)
	require.True(t, ok)
	require.Equal(t, a, got, "the first cached copy")
	p.allocate() // two more blocks in use, so the queue holds only the copies below
	p.allocate()
	p.release(a)
	p.release(b)
	// The first copy is evicted first; the hash stays cached in the other.
	_, ev, was := p.allocate()
	require.True(t, was)
	require.Equal(t, d, ev)
	got, ok = p.lookup(d)
	require.True(t, ok)
	require.Equal(t, b, got)
	p.uncache(b)
	_, ok = p.lookup(d)
	require.False(t, ok)
	require.Zero(t, p.numCachedBlocks())
}
