package simengine

import (
	"slices"
	"time"
)

// seq is the scheduler's state of one request.
type seq struct {
	id        ReqID
	req       Request
	tokens    []uint32 // prompt followed by generated tokens
	promptLen int
	seed      uint64
	computed  int       // tokens whose KV is in the cache
	blocks    []int32   // KV blocks held, in sequence order
	numCached int       // leading blocks already in the prefix cache for this request
	hashes    []Digest  // digests of the full blocks of tokens, computed lazily
	gblocks   [][]int32 // hybrid mode: blocks held in each of hy.groups, -1 where skipped (hybrid_alloc.go)
	outputs   int
	arrival   time.Time
	first     time.Time
	cached    int  // prefix-cache hit at first admission, in tokens
	remote    int  // tokens beyond cached taken from a KV transfer at first admission
	counted   bool // prefix-cache lookup already counted
	running   bool
	done      bool
	schedN    int // tokens scheduled in the step in flight
}

// note is one pending callback.
type note struct {
	done    bool
	onToken func(TokenEvent)
	tok     TokenEvent
	onDone  func(Result)
	res     Result
}

// beginStepLocked schedules one step starting at start, vLLM-style: running
// requests first (a decode token each, or their next prefill chunk), preempting
// from the tail of the running queue when blocks run out; then, if nothing was
// preempted, waiting requests in FCFS order while the token budget, the sequence
// limit and free blocks allow. Blocks that will be full after the step are
// cached (and reported) at schedule time, as vLLM's allocate_slots does.
func (e *Engine) beginStepLocked(start time.Time) bool {
	budget := e.cfg.MaxNumBatchedTokens
	e.sched = e.sched[:0]
	e.pending = e.pending[:0]
	for i := 0; i < len(e.running) && budget > 0; i++ {
		s := e.running[i]
		n := min(len(s.tokens)-s.computed, budget)
		if !e.allocateLocked(s, s.computed+n) {
			break // s preempted itself: it was the last running request
		}
		e.cacheFullLocked(s, s.computed+n)
		s.schedN = n
		e.sched = append(e.sched, s)
		budget -= n
	}
	// Like vLLM, nobody is admitted in a step that preempted; an empty step would
	// stall the engine, so then admission runs anyway.
	if e.lo != nil {
		e.lo.beginStep(e.sched)
	}
	if !e.preemptedThisStep || len(e.sched) == 0 {
		budget = e.admitLocked(budget)
	}
	e.preemptedThisStep = false
	if len(e.sched) == 0 {
		e.noteStallLocked() // pd.go
		e.flushEventsLocked(start)
		return false
	}
	tokens := e.cfg.MaxNumBatchedTokens - budget
	e.inflight = true
	e.stepEnd = start.Add(e.cfg.stepDuration(tokens))
	if e.lo != nil {
		e.stepEnd = e.stepEnd.Add(e.lo.stepCost(e.cfg.TimeScale))
		e.lo.record(e.running, e.waiting, start)
	}
	e.stats.Steps++
	return true
}

// admitLocked moves waiting requests to running in FCFS order while the token
// budget, the sequence limit and free blocks allow, and returns the budget left.
func (e *Engine) admitLocked(budget int) int {
	bs := e.cfg.BlockSize
	for i := 0; i < len(e.waiting) && budget > 0 && len(e.running) < e.cfg.MaxNumSeqs; {
		s := e.waiting[i]
		if e.lo != nil && !e.lo.fits(s.req.LoRAName) {
			i++ // its adapter finds no slot in this batch: skipped, as vLLM does
			continue
		}
		hits := e.cacheHitLocked(s)
		hitTokens := len(hits) * bs
		start := e.remoteStartLocked(s, hitTokens) // pd.go
		n := min(len(s.tokens)-start, budget)
		newBlocks := (start+n+bs-1)/bs - len(hits)
		evictable := 0
		for _, b := range hits {
			if e.pool.ref[b] == 0 {
				evictable++
			}
		}
		need := newBlocks + evictable
		if e.hy != nil {
			// Every group allocates from the same pool (hybrid_alloc.go).
			need += e.hybridAdmitNeedLocked(s, len(hits), start, start+n)
		}
		if need > e.pool.free {
			break // FCFS: the head waits for blocks, nobody overtakes it
		}
		for _, b := range hits {
			e.pool.touch(b)
		}
		s.blocks = append(s.blocks[:0], hits...)
		s.computed, s.numCached = start, len(hits)
		if e.hy != nil {
			e.hybridTouchHitsLocked(s, len(hits))
		}
		e.allocBlocksLocked(s, newBlocks)
		if e.hy != nil {
			e.hybridAllocLocked(s, start+n)
		}
		if !s.counted {
			s.counted, s.cached, s.remote = true, hitTokens, start-hitTokens
			e.stats.PrefixCacheQueries += uint64(len(s.tokens))
			e.stats.PrefixCacheHits += uint64(hitTokens)
			e.stats.KVTransferTokens += uint64(start - hitTokens)
		}
		e.cacheFullLocked(s, start+n)
		if i == 0 {
			e.waiting = e.waiting[1:]
		} else {
			e.waiting = slices.Delete(e.waiting, i, i+1)
		}
		if e.lo != nil {
			if loaded, evicted := e.lo.use(s.req.LoRAName); loaded {
				e.stats.LoRALoads++
				if evicted != "" {
					e.stats.LoRAEvictions++
				}
			}
		}
		s.running = true
		e.running = append(e.running, s)
		s.schedN = n
		e.sched = append(e.sched, s)
		budget -= n
	}
	return budget
}

// cacheHitLocked returns the blocks of the longest cached prefix of s, capped at
// floor((len-1)/bs) blocks because vLLM always recomputes the last prompt token.
func (e *Engine) cacheHitLocked(s *seq) []int32 {
	maxBlocks := (len(s.tokens) - 1) / e.cfg.BlockSize
	hits := e.hitScratch[:0]
	full := e.fullGroupLocked()
	for i := 0; i < maxBlocks; i++ {
		e.ensureHashesLocked(s, i+1)
		b, ok := e.pool.lookup(gkey{full, s.hashes[i]})
		if !ok {
			break
		}
		hits = append(hits, b)
	}
	if e.hy != nil {
		hits = e.hybridHitLocked(s, hits)
	}
	e.hitScratch = hits
	return hits
}

// allocateLocked gives a running request the blocks for upTo tokens, preempting
// the last running request while blocks are short. It returns false if s itself
// was preempted. In hybrid mode the blocks are those of every group, which
// first frees what it no longer needs (hybrid_alloc.go).
func (e *Engine) allocateLocked(s *seq, upTo int) bool {
	fullNeed := (upTo+e.cfg.BlockSize-1)/e.cfg.BlockSize - len(s.blocks)
	need := fullNeed
	if e.hy != nil {
		e.hybridSkipLocked(s)
		need = max(0, fullNeed) + e.hybridNeedLocked(s, upTo)
	}
	for need > e.pool.free {
		victim := e.running[len(e.running)-1]
		e.preemptLocked(victim)
		e.preemptedThisStep = true // s preempting itself counts too
		if victim == s {
			return false
		}
	}
	e.allocBlocksLocked(s, fullNeed)
	if e.hy != nil {
		e.hybridAllocLocked(s, upTo)
	}
	return true
}

// allocBlocksLocked appends n new full-attention blocks to s.
func (e *Engine) allocBlocksLocked(s *seq, n int) {
	for range n {
		s.blocks = append(s.blocks, e.allocBlockLocked())
	}
}

// allocBlockLocked takes a block from the pool for any group, queueing the
// removal of the cached block it evicts, named by that block's group.
func (e *Engine) allocBlockLocked() int32 {
	b, evicted, was := e.pool.allocate()
	if was && e.cfg.Sink != nil {
		e.pending = append(e.pending, Event{Type: BlockRemoved, BlockHashes: []uint64{evicted.d.U64()}, Medium: MediumGPU, GroupIdx: evicted.group})
	}
	return b
}

// preemptLocked moves a running request back to the head of the waiting queue
// (recompute preemption): its blocks are released and stay cached.
func (e *Engine) preemptLocked(s *seq) {
	e.running = slices.DeleteFunc(e.running, func(x *seq) bool { return x == s })
	e.releaseLocked(s)
	s.running, s.computed, s.numCached = false, 0, 0
	e.waiting = slices.Insert(e.waiting, 0, s)
	e.stats.Preemptions++
}

// releaseLocked frees the blocks of s in reverse order, so that the tail of a
// sequence is evicted before its head, as vLLM's free_blocks does; in hybrid
// mode the other groups' blocks after them (hybrid_alloc.go).
func (e *Engine) releaseLocked(s *seq) {
	for i := len(s.blocks) - 1; i >= 0; i-- {
		e.pool.release(s.blocks[i])
	}
	s.blocks = s.blocks[:0]
	if e.hy != nil {
		e.hybridReleaseLocked(s.gblocks)
	}
}

// ensureHashesLocked computes the digests of the first n full blocks of s.
func (e *Engine) ensureHashesLocked(s *seq, n int) {
	bs := e.cfg.BlockSize
	for i := len(s.hashes); i < n; i++ {
		parent := NoneHash
		if i > 0 {
			parent = s.hashes[i-1]
		}
		s.hashes = append(s.hashes, e.hasher.hash(parent, s.tokens[i*bs:(i+1)*bs], e.extraKeysLocked(s, i)))
	}
}

// extraKeysLocked returns the extra keys of block i of s (scratch slice): the
// LoRA name on every block, then the multimodal items the block overlaps,
// then the cache salt on block 0, in vLLM's order.
func (e *Engine) extraKeysLocked(s *seq, i int) []ExtraKey {
	k := e.keys[:0]
	if s.req.LoRAName != "" {
		k = append(k, ExtraKey{Value: s.req.LoRAName})
	}
	bs := e.cfg.BlockSize
	k = appendMMKeys(k, s.req.MM, i*bs, (i+1)*bs, i, s.promptLen/bs)
	if i == 0 && s.req.CacheSalt != "" {
		k = append(k, ExtraKey{Value: s.req.CacheSalt})
	}
	e.keys = k
	return k
}

// cacheFullLocked inserts the blocks of s that are full once upTo tokens are
// computed into the prefix cache and records one BlockStored for them.
func (e *Engine) cacheFullLocked(s *seq, upTo int) {
	bs := e.cfg.BlockSize
	full := upTo / bs
	if full <= s.numCached {
		return
	}
	e.ensureHashesLocked(s, full)
	fullGroup := e.fullGroupLocked()
	for i := s.numCached; i < full; i++ {
		e.pool.cache(s.blocks[i], gkey{fullGroup, s.hashes[i]})
	}
	if e.hy != nil {
		e.hybridStoreLocked(s, s.numCached, full, true)
	}
	if e.cfg.Sink != nil {
		ev := Event{
			Type: BlockStored, BlockSize: bs, LoRAID: s.req.LoRAID, LoRAName: s.req.LoRAName,
			Medium: MediumGPU, GroupIdx: e.fullGroupLocked(), Kind: KindFullAttention,
			BlockHashes: make([]uint64, 0, full-s.numCached),
			TokenIDs:    slices.Clone(s.tokens[s.numCached*bs : full*bs]),
			ExtraKeys:   make([][]ExtraKey, 0, full-s.numCached),
		}
		if s.numCached > 0 {
			ev.ParentHash, ev.HasParent = s.hashes[s.numCached-1].U64(), true
		}
		for i := s.numCached; i < full; i++ {
			ev.BlockHashes = append(ev.BlockHashes, s.hashes[i].U64())
			var keys []ExtraKey
			if k := e.extraKeysLocked(s, i); len(k) > 0 {
				keys = slices.Clone(k)
			}
			ev.ExtraKeys = append(ev.ExtraKeys, keys)
		}
		e.pending = append(e.pending, ev)
	}
	if e.hy != nil {
		e.hybridStoreLocked(s, s.numCached, full, false)
	}
	s.numCached = full
}

// finishStepLocked applies the step in flight at its end time: scheduled tokens
// become computed, requests whose tokens are all computed sample their next
// token, and requests reaching max_tokens finish.
func (e *Engine) finishStepLocked(end time.Time) {
	e.inflight = false
	for _, s := range e.sched {
		if s.done || !s.running {
			continue
		}
		s.computed += s.schedN
		s.schedN = 0
		if s.computed < len(s.tokens) {
			continue // more prefill chunks to go
		}
		tok := generatedToken(s.seed, s.outputs)
		s.tokens = append(s.tokens, tok)
		s.outputs++
		e.stats.GenerationTokens++
		if s.outputs == 1 {
			s.first = end
			// vLLM counts prompt_tokens with the first output, not at
			// admission: a prefill aborted midway never counts.
			e.stats.PromptTokens += uint64(s.promptLen)
		}
		if s.req.OnToken != nil {
			e.notes = append(e.notes, note{onToken: s.req.OnToken, tok: TokenEvent{
				ID: s.id, Index: s.outputs - 1, Token: tok, Text: genText[tok], Time: end}})
		}
		if s.outputs >= s.req.MaxTokens {
			e.finishLocked(s, end, FinishLength, nil)
		}
	}
	e.sched = e.sched[:0]
	if e.lo != nil && len(e.running) == 0 && len(e.waiting) == 0 {
		// vLLM records the adapters after every step's outputs: the step
		// that finished the last request leaves a series naming none,
		// which stays the newest while the engine idles.
		e.lo.record(nil, nil, end)
	}
	e.flushEventsLocked(end)
}

// flushEventsLocked turns the events of the step into one batch.
func (e *Engine) flushEventsLocked(t time.Time) {
	if len(e.pending) == 0 {
		return
	}
	e.batches = append(e.batches, EventBatch{Time: t, Events: slices.Clone(e.pending)})
	e.pending = e.pending[:0]
}

// finishLocked ends a request (success, abort or close) and queues OnDone.
func (e *Engine) finishLocked(s *seq, t time.Time, reason string, err error) {
	if s.done {
		return
	}
	s.done = true
	delete(e.byID, s.id)
	if s.running {
		e.running = slices.DeleteFunc(e.running, func(x *seq) bool { return x == s })
		if reason == FinishLength && s.req.HoldKV {
			e.holdLocked(s) // pd.go
		} else {
			e.releaseLocked(s)
		}
		s.running = false
	} else {
		e.waiting = slices.DeleteFunc(e.waiting, func(x *seq) bool { return x == s })
	}
	if reason == FinishLength {
		e.stats.RequestSuccess++
	} else {
		e.stats.RequestAborted++
	}
	if s.req.OnDone == nil {
		return
	}
	out := slices.Clone(s.tokens[s.promptLen:])
	e.notes = append(e.notes, note{done: true, onDone: s.req.OnDone, res: Result{
		ID: s.id, PromptTokens: s.promptLen, CachedTokens: s.cached, RemoteKVTokens: s.remote, OutputTokens: out, Text: Detokenize(out),
		Arrival: s.arrival, FirstToken: s.first, Finish: t, FinishReason: reason, Err: err,
	}})
}
