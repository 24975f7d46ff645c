package simengine

import (
	"slices"
	"sync"
)

// This file holds the engine side of prefill/decode disaggregation: a
// decode engine admits a request whose prompt KV arrived by transfer
// (Request.RemoteKVTokens), and a prefill engine answers which leading
// blocks of a request it still holds (CachedBlocks), which is what a decoder
// reads. The HTTP protocol around it (kv_transfer_params, the read route,
// failures) is simengine/server's pd.go.
//
// What vLLM does, and the model follows: a decode instance given
// kv_transfer_params with do_remote_prefill allocates the request's blocks,
// keeps the request in WAITING_FOR_REMOTE_KVS while its KV connector reads
// the prefiller's blocks, then caches the received blocks with the same
// cache_blocks call as locally computed ones (so, with KV events on, the
// decoder publishes BlockStored for them, medium GPU, like any other
// block) and schedules the request with those tokens computed; when all
// prompt tokens arrived it still recomputes the last one to sample. A
// failed read (kv_load_failure_policy "recompute", the default) truncates
// the computed tokens to the first missing block and computes the rest
// locally; policy "fail" fails the request.

// remoteStartLocked returns where computation of s starts at admission: the
// local prefix-cache hit, or further if a KV transfer delivered more of the
// prompt (first admission only: a preempted request recomputes, finding
// the transferred blocks in its prefix cache if they are still there).
func (e *Engine) remoteStartLocked(s *seq, hit int) int {
	if s.counted || s.req.RemoteKVTokens <= hit {
		return hit
	}
	return max(hit, min(s.req.RemoteKVTokens, s.promptLen-1))
}

// CachedBlocks returns the hashes (Digest.U64, what KV events carry) of the
// leading full blocks of r's prompt that the prefix cache holds right now,
// keyed as r would key them (cache salt and LoRA name included): the
// blocks a prefill engine can hand to a decoder for r.
func (e *Engine) CachedBlocks(r Request) []uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &seq{req: r, tokens: r.Prompt}
	var out []uint64
	for i := 0; (i+1)*e.cfg.BlockSize <= len(r.Prompt); i++ {
		e.ensureHashesLocked(s, i+1)
		if _, ok := e.pool.lookup(gkey{e.fullGroupLocked(), s.hashes[i]}); !ok {
			break
		}
		out = append(out, s.hashes[i].U64())
	}
	return out
}

// Defer counts one request waiting for its KV transfer before it is
// submitted (vLLM keeps such a request in its waiting queue as
// WAITING_FOR_REMOTE_KVS): it shows in Stats.Deferred and in
// vllm:num_requests_waiting until the returned function is called (once;
// later calls do nothing).
func (e *Engine) Defer() (done func()) {
	e.mu.Lock()
	e.stats.Deferred++
	e.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Lock()
			e.stats.Deferred--
			e.mu.Unlock()
		})
	}
}

// holdLocked keeps the blocks of a finished request s referenced for a
// decoder's read (Request.HoldKV).
func (e *Engine) holdLocked(s *seq) {
	if e.held == nil {
		e.held = make(map[ReqID][]int32)
	}
	e.held[s.id] = slices.Clone(s.blocks)
	e.stats.HeldRequests++
	e.stats.HeldBlocks += len(s.blocks)
	s.blocks = s.blocks[:0]
	if e.hy != nil {
		e.stats.HeldBlocks += e.hybridHoldLocked(s)
	}
}

// ReleaseKV frees the blocks a finished request with HoldKV still holds
// (the decoder has read them, or the prefiller gave up waiting), tail
// first as vLLM frees a request's blocks; they stay cached until reused.
// It reports whether id held any.
func (e *Engine) ReleaseKV(id ReqID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	blocks, ok := e.held[id]
	if !ok {
		return false
	}
	delete(e.held, id)
	freed := len(blocks)
	for i := len(blocks) - 1; i >= 0; i-- {
		e.pool.release(blocks[i])
	}
	if e.hy != nil {
		freed += e.hybridReleaseLocked(e.hy.held[id])
		delete(e.hy.held, id)
	}
	e.stats.HeldRequests--
	e.stats.HeldBlocks -= freed
	e.signal() // waiting requests may fit now
	return true
}

// noteStallLocked is called when a step scheduled nothing: if requests
// wait while nothing runs and blocks are held for KV transfers, the head
// waits for a ReleaseKV, and the engine idles (nextLocked) instead of
// spinning until something changes (signal clears the mark). Without held
// blocks an engine with nothing running always has room for its head
// (Submit rejects what could never fit).
func (e *Engine) noteStallLocked() {
	e.stalled = len(e.held) > 0 && len(e.waiting) > 0 && len(e.running) == 0
}
