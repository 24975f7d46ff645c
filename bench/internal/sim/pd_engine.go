package sim

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"time"

	"github.com/kvroute/kvroute/simengine"
)

// PDRole is an engine's role in the P/D study.
type PDRole string

// The P/D study's engine roles, as kvroute's endpoints name them.
const (
	// RoleBoth computes prompts and decodes them (an aggregated engine).
	RoleBoth PDRole = "both"
	// RolePrefill computes prompts, answers one token and holds the blocks
	// until the decoder has pulled them (vLLM's kv_producer with
	// do_remote_decode).
	RolePrefill PDRole = "prefill"
	// RoleDecode decodes; a request with remote prefill pulls the prompt's
	// KV from its prefiller, one that the router keeps local is prefilled
	// here (vLLM's kv_consumer).
	RoleDecode PDRole = "decode"
)

// pdEngine is the P/D study's engine model: vLLM's scheduler as the rest
// of the simulation models it (simengine's step cost, chunked prefill under
// a token budget, a running-request cap, FCFS waiting, a prefix cache of
// full blocks with LRU eviction, KV events for every block cached or
// evicted) plus the KV-transfer states simengine does not have yet: a
// prefill-role request that holds its blocks after its one token until
// the decoder has read them, and a decode-role request that allocates its
// blocks, waits for the transfer (WAITING_FOR_REMOTE_KVS), then caches the
// pulled blocks — publishing BlockStored for them, as vLLM's scheduler
// does once a remote load has finished — and recomputes only the prompt's
// last token. Differences from simengine, each stated in bench/README.md:
// a request reserves the blocks of its whole answer at admission, so there
// is no preemption; every token of a step (prompt or decode) costs
// 1/PrefillTokensPerSecond on top of the step's fixed cost, as in
// simengine.
type pdEngine struct {
	cfg  pdEngineConfig
	role PDRole
	now  time.Time
	sink func(simengine.EventBatch)

	waiting   []*pdSeq
	running   []*pdSeq
	importing []*pdSeq // decode role: blocks allocated, transfer in flight
	stepping  bool
	stepEnd   time.Time
	sched     []*pdSeq
	blocked   bool      // nothing schedulable until something changes
	linkFree  time.Time // the decoder's inbound link is busy until then

	ref    []int32
	hash   []uint64 // 0: the block holds no cached hash
	parent []uint64
	byHash map[uint64]int32
	free   []int32 // free blocks holding no hash
	lru    pdLRU   // free blocks holding a hash, least recently used first
	events []simengine.Event

	stats pdEngineStats
}

// pdEngineConfig is one engine's shape (Fleet's fields) and the KV link.
type pdEngineConfig struct {
	BlockSize, NumBlocks, MaxBatched, MaxSeqs int
	PrefillTokensPerSecond                    float64
	StepCost                                  time.Duration
	Transfer                                  KVTransfer
}

// pdEngineStats are an engine's counters.
type pdEngineStats struct {
	queries, hits   int64 // prompt tokens looked up in the prefix cache, and hit
	computed        int64 // prompt tokens computed here
	pulled          int64 // prompt tokens pulled from a prefiller
	generated       int64 // output tokens
	transferBusy    time.Duration
	maxTransferWait time.Duration
}

// pdSeq is one request on one engine.
type pdSeq struct {
	tokens    []uint32 // the prompt, then the answer the engine generates
	promptLen int
	maxOut    int
	computed  int
	outputs   int
	blocks    []int32
	hashes    []uint64
	remote    bool // decode role: the prompt's KV comes from a prefiller
	imported  bool // its transfer has finished
	hold      bool // prefill role: keep the blocks after the end until release
	ready     time.Time
	schedN    int
	onFirst   func(time.Time)
	onDone    func(time.Time)
	onPulled  func(time.Time) // remote: the transfer has finished
}

func newPDEngine(cfg pdEngineConfig, role PDRole, start time.Time, sink func(simengine.EventBatch)) *pdEngine {
	e := &pdEngine{cfg: cfg, role: role, now: start, sink: sink, byHash: map[uint64]int32{},
		ref: make([]int32, cfg.NumBlocks), hash: make([]uint64, cfg.NumBlocks), parent: make([]uint64, cfg.NumBlocks)}
	e.lru.init(cfg.NumBlocks)
	for b := cfg.NumBlocks - 1; b >= 0; b-- {
		e.free = append(e.free, int32(b))
	}
	return e
}

// submit queues a request at time now (the engine is advanced to it).
func (e *pdEngine) submit(now time.Time, s *pdSeq) {
	e.advance(now)
	e.waiting = append(e.waiting, s)
	e.blocked = false
}

// release frees a prefill-role request's held blocks once its KV has been
// pulled (vLLM frees them on the connector's finished_sending).
func (e *pdEngine) release(now time.Time, s *pdSeq) {
	e.advance(now)
	e.unref(s)
	e.blocked = false
}

// nextTime is the engine's next event: its step's end, a transfer's
// arrival, or now when it is idle with work it can schedule.
func (e *pdEngine) nextTime() (time.Time, bool) {
	var next time.Time
	found := false
	consider := func(t time.Time) {
		if !found || t.Before(next) {
			next, found = t, true
		}
	}
	if e.stepping {
		consider(e.stepEnd)
	} else if !e.blocked && (len(e.waiting) > 0 || len(e.running) > 0) {
		consider(e.now)
	}
	for _, s := range e.importing {
		consider(s.ready)
	}
	return next, found
}

// advance runs the engine up to t.
func (e *pdEngine) advance(t time.Time) {
	for {
		next, ok := e.nextTime()
		if !ok || next.After(t) {
			break
		}
		if next.After(e.now) {
			e.now = next
		}
		switch {
		case e.stepping && !e.stepEnd.After(e.now):
			e.endStep()
		case e.arrive():
		case !e.stepping:
			if !e.beginStep() {
				e.blocked = true
			}
		}
	}
	if t.After(e.now) {
		e.now = t
	}
}

// arrive finishes the transfers due by now: the pulled blocks are cached
// (and published) and the request waits to be scheduled, ahead of new ones.
func (e *pdEngine) arrive() bool {
	var due []*pdSeq
	e.importing = slices.DeleteFunc(e.importing, func(s *pdSeq) bool {
		if !s.ready.After(e.now) {
			due = append(due, s)
			return true
		}
		return false
	})
	if len(due) == 0 {
		return false
	}
	for _, s := range due {
		s.imported = true
		s.computed = s.promptLen - 1 // vLLM recomputes the last prompt token
		e.cacheFull(s, s.computed)
		if s.onPulled != nil {
			s.onPulled(e.now)
		}
	}
	e.waiting = append(due, e.waiting...)
	e.blocked = false
	e.flush(e.now)
	return true
}

// beginStep schedules one step at now: running requests first (a decode
// token each, or their next prefill chunk), then waiting ones in FCFS
// order while the budget, the sequence cap and free blocks allow.
func (e *pdEngine) beginStep() bool {
	budget := e.cfg.MaxBatched
	e.sched = e.sched[:0]
	for _, s := range e.running {
		if budget == 0 {
			break
		}
		n := min(s.promptLen+s.outputs-s.computed, budget)
		if n <= 0 {
			continue
		}
		e.cacheFull(s, s.computed+n)
		s.schedN = n
		e.sched = append(e.sched, s)
		budget -= n
	}
	for len(e.waiting) > 0 && budget > 0 && len(e.running) < e.cfg.MaxSeqs {
		s := e.waiting[0]
		if !s.imported {
			if !e.admit(s) {
				break // FCFS: the head waits for blocks
			}
		}
		e.waiting = e.waiting[1:]
		if s.remote && !s.imported {
			continue // its transfer is in flight
		}
		n := min(s.promptLen-s.computed, budget)
		e.cacheFull(s, s.computed+n)
		s.schedN = n
		e.running = append(e.running, s)
		e.sched = append(e.sched, s)
		budget -= n
	}
	e.flush(e.now)
	if len(e.sched) == 0 {
		return false
	}
	tokens := e.cfg.MaxBatched - budget
	e.stepping = true
	e.stepEnd = e.now.Add(e.cfg.StepCost + time.Duration(float64(tokens)/e.cfg.PrefillTokensPerSecond*float64(time.Second)))
	return true
}

// admit gives s its cached prefix and blocks for its prompt and answer; a
// remote request then starts its transfer of the rest of the prompt.
func (e *pdEngine) admit(s *pdSeq) bool {
	bs := e.cfg.BlockSize
	e.ensureHashes(s)
	limit := (s.promptLen - 1) / bs
	hits := 0
	for hits < limit {
		if _, ok := e.byHash[s.hashes[hits]]; !ok {
			break
		}
		hits++
	}
	need := (s.promptLen+s.maxOut+bs-1)/bs - hits
	evictable := 0
	for _, h := range s.hashes[:hits] {
		if e.ref[e.byHash[h]] == 0 {
			evictable++
		}
	}
	if need+evictable > len(e.free)+e.lru.n {
		return false
	}
	s.blocks = s.blocks[:0]
	for _, h := range s.hashes[:hits] {
		b := e.byHash[h]
		if e.ref[b] == 0 {
			e.lru.remove(b)
		}
		e.ref[b]++
		s.blocks = append(s.blocks, b)
	}
	for range need {
		b := e.take()
		e.ref[b] = 1
		s.blocks = append(s.blocks, b)
	}
	s.computed = hits * bs
	e.stats.queries += int64(s.promptLen)
	e.stats.hits += int64(s.computed)
	if s.remote {
		pull := max(s.promptLen-1-s.computed, 0)
		e.stats.pulled += int64(pull)
		start := e.now
		if e.linkFree.After(start) {
			start = e.linkFree
		}
		d := e.cfg.Transfer.time(pull)
		s.ready = start.Add(d)
		e.linkFree = s.ready
		e.stats.transferBusy += d
		e.stats.maxTransferWait = max(e.stats.maxTransferWait, start.Sub(e.now))
		e.importing = append(e.importing, s)
	}
	return true
}

// take returns a free block, evicting the least recently used cached one
// when no uncached block is left.
func (e *pdEngine) take() int32 {
	if n := len(e.free); n > 0 {
		b := e.free[n-1]
		e.free = e.free[:n-1]
		return b
	}
	b := e.lru.pop()
	h := e.hash[b]
	delete(e.byHash, h)
	e.hash[b] = 0
	e.events = append(e.events, simengine.Event{Type: simengine.BlockRemoved, BlockHashes: []uint64{h}, Medium: simengine.MediumGPU})
	return b
}

// unref drops s's references; blocks that reach 0 become free (cached
// ones at the LRU's tail).
func (e *pdEngine) unref(s *pdSeq) {
	for _, b := range s.blocks {
		if e.ref[b]--; e.ref[b] == 0 {
			if e.hash[b] != 0 {
				e.lru.push(b)
			} else {
				e.free = append(e.free, b)
			}
		}
	}
	s.blocks = nil
}

// cacheFull caches s's blocks that upTo tokens fill, as vLLM does at
// schedule time, and queues their BlockStored event.
func (e *pdEngine) cacheFull(s *pdSeq, upTo int) {
	bs := e.cfg.BlockSize
	full := min(upTo/bs, len(s.blocks))
	e.ensureHashes(s)
	var ev *simengine.Event
	for i := 0; i < full; i++ {
		b := s.blocks[i]
		h := s.hashes[i]
		if e.hash[b] == h {
			continue
		}
		if _, ok := e.byHash[h]; ok {
			continue // another block holds it: this copy stays uncached
		}
		e.hash[b] = h
		e.byHash[h] = b
		if ev == nil || i == 0 || s.hashes[i-1] != ev.BlockHashes[len(ev.BlockHashes)-1] {
			e.events = append(e.events, simengine.Event{Type: simengine.BlockStored, BlockSize: bs, Medium: simengine.MediumGPU, Kind: simengine.KindFullAttention})
			ev = &e.events[len(e.events)-1]
			if i > 0 {
				ev.ParentHash, ev.HasParent = s.hashes[i-1], true
			}
		}
		ev.BlockHashes = append(ev.BlockHashes, h)
		ev.TokenIDs = append(ev.TokenIDs, s.tokens[i*bs:(i+1)*bs]...)
	}
}

// ensureHashes computes the chained block hashes of every full block of
// s's tokens (the engine's own hash; the router keys blocks by their
// tokens, so only its consistency matters).
func (e *pdEngine) ensureHashes(s *pdSeq) {
	bs := e.cfg.BlockSize
	n := len(s.tokens) / bs
	if len(s.hashes) >= n {
		return
	}
	var buf [4]byte
	for i := len(s.hashes); i < n; i++ {
		h := fnv.New64a()
		if i > 0 {
			var p [8]byte
			binary.LittleEndian.PutUint64(p[:], s.hashes[i-1])
			h.Write(p[:])
		}
		for _, t := range s.tokens[i*bs : (i+1)*bs] {
			binary.LittleEndian.PutUint32(buf[:], t)
			h.Write(buf[:])
		}
		v := h.Sum64()
		if v == 0 {
			v = 1
		}
		s.hashes = append(s.hashes, v)
	}
}

// endStep applies the step: computed tokens, the tokens it generated,
// the requests it finished.
func (e *pdEngine) endStep() {
	e.stepping = false
	e.blocked = false
	at := e.stepEnd
	var finished []*pdSeq
	for _, s := range e.sched {
		if s.computed < s.promptLen {
			e.stats.computed += int64(min(s.computed+s.schedN, s.promptLen) - s.computed)
		}
		s.computed += s.schedN
		s.schedN = 0
		if s.computed < s.promptLen+s.outputs {
			continue
		}
		s.outputs++
		e.stats.generated++
		if s.outputs == 1 && s.onFirst != nil {
			s.onFirst(at)
		}
		if s.outputs >= s.maxOut {
			finished = append(finished, s)
		}
	}
	for _, s := range finished {
		e.running = slices.DeleteFunc(e.running, func(x *pdSeq) bool { return x == s })
		if !s.hold {
			e.unref(s)
		}
		if s.onDone != nil {
			s.onDone(at)
		}
	}
	e.flush(at)
}

// flush publishes the queued events as one batch.
func (e *pdEngine) flush(at time.Time) {
	if len(e.events) == 0 {
		return
	}
	if e.sink != nil {
		e.sink(simengine.EventBatch{Time: at, Events: e.events})
	}
	e.events = nil
}

// pdLRU is a doubly linked list of blocks, least recently freed first.
type pdLRU struct {
	prev, next []int32
	in         []bool
	head, tail int32
	n          int
}

func (l *pdLRU) init(n int) {
	l.prev, l.next, l.in = make([]int32, n), make([]int32, n), make([]bool, n)
	l.head, l.tail = -1, -1
}

func (l *pdLRU) push(b int32) {
	l.prev[b], l.next[b] = l.tail, -1
	if l.tail >= 0 {
		l.next[l.tail] = b
	} else {
		l.head = b
	}
	l.tail = b
	l.in[b] = true
	l.n++
}

func (l *pdLRU) remove(b int32) {
	if !l.in[b] {
		return
	}
	p, n := l.prev[b], l.next[b]
	if p >= 0 {
		l.next[p] = n
	} else {
		l.head = n
	}
	if n >= 0 {
		l.prev[n] = p
	} else {
		l.tail = p
	}
	l.in[b] = false
	l.n--
}

func (l *pdLRU) pop() int32 {
	b := l.head
	l.remove(b)
	return b
}
