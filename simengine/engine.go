package simengine

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Engine is a simulated vLLM engine: a step scheduler over a paged KV cache with
// vLLM's prefix caching and KV events. It runs either on a virtual clock driven
// by AdvanceTo (New), or on the wall clock with its own goroutine (NewRealTime).
// All methods are safe for concurrent use; in virtual mode a single goroutine
// should drive AdvanceTo.
//
// Ownership: in real time, NewRealTime starts the run goroutine, which
// advances the engine to time.Now at each step's end or as soon as work is
// pending (signal pokes wake to cut its sleep short), until Close closes
// stop; it then closes done, which Close waits for (in virtual mode done is
// closed at once and the callers of AdvanceTo advance). mu guards the
// fields from now to stats but spareNotes, held, stalled and the state
// behind hy and lo; the methods take it and the *Locked helpers run with it
// held. deliverMu is taken with mu held and kept after mu is released,
// while the sink and the requests' callbacks run on the goroutine that
// advanced (or on Close's); it serialises deliveries and guards
// spareNotes. cfg, realtime, wake, stop, done, unreg, log and the hy and lo
// pointers are set by the constructor and not written after.
type Engine struct {
	cfg      Config
	realtime bool

	mu                sync.Mutex
	now               time.Time
	closed            bool
	nextID            ReqID
	pool              *blockPool
	hasher            hasher
	waiting           []*seq
	running           []*seq
	byID              map[ReqID]*seq
	inflight          bool
	stepEnd           time.Time
	sched             []*seq
	keys              []ExtraKey // scratch for extra keys
	hitScratch        []int32
	preemptedThisStep bool
	pending           []Event // events of the current step
	batches           []EventBatch
	notes             []note
	spareNotes        []note // the last delivered notes' array, for reuse (guarded by deliverMu)
	stats             Stats

	deliverMu sync.Mutex // serializes delivery (callbacks and sink calls)

	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	unreg     func()
	log       *slog.Logger

	held    map[ReqID][]int32 // blocks of finished requests held for a KV transfer (pd.go)
	stalled bool              // the waiting head needs held blocks; idle until signal (pd.go)
	hy      *hybrid           // hybrid-attention mode (hybrid.go); nil without Config.Hybrid
	lo      *loraState        // LoRA adapter slots (lora.go); nil without Config.LoRA
}

// New returns an engine on a virtual clock starting at cfg.Start. Time moves only
// through AdvanceTo (or RunUntilIdle), so runs are deterministic.
func New(cfg Config, opts Options) (*Engine, error) {
	return newEngine(cfg, opts, false)
}

// NewRealTime returns an engine on the wall clock, with a goroutine that runs
// scheduler steps as requests arrive and sleeps for each step's duration. Close
// stops it.
func NewRealTime(cfg Config, opts Options) (*Engine, error) {
	return newEngine(cfg, opts, true)
}

func newEngine(cfg Config, opts Options, realtime bool) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg: cfg, realtime: realtime, now: cfg.Start, log: opts.Log(),
		pool: newBlockPool(cfg.NumGPUBlocks, cfg.NullBlock), byID: make(map[ReqID]*seq),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if cfg.Hybrid != nil {
		e.hy = newHybrid(cfg.Hybrid, e.pool)
	}
	if cfg.LoRA != nil {
		e.lo = newLoRAState(*cfg.LoRA)
	}
	if realtime {
		e.now = time.Now()
	}
	e.stats.NumBlocks = cfg.NumGPUBlocks
	if opts.Registerer != nil {
		var c prometheus.Collector = newCollector(e)
		if e.lo != nil {
			c = loraCollectors{c, newLoRACollector(e)}
		}
		if err := opts.Register(c); err != nil {
			return nil, fmt.Errorf("engine: registering metrics: %w", err)
		}
		e.unreg = func() { opts.Unregister(c) }
	}
	if realtime {
		go e.run()
	} else {
		close(e.done)
	}
	e.log.Info("simulated engine started", "model", cfg.Model, "blockSize", cfg.BlockSize,
		"numGPUBlocks", cfg.NumGPUBlocks, "realtime", realtime)
	return e, nil
}

// Config returns the effective configuration (defaults filled in).
func (e *Engine) Config() Config { return e.cfg }

// BlockSize returns the KV block size in tokens.
func (e *Engine) BlockSize() int { return e.cfg.BlockSize }

// Now returns the engine's clock: the virtual time, or time.Now in real time.
func (e *Engine) Now() time.Time {
	if e.realtime {
		return time.Now()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

// Submit enqueues a request (FCFS) at the engine's current time and returns its
// ID. It fails with ErrClosed, ErrEmptyPrompt, ErrMaxTokens or ErrTooLong.
func (e *Engine) Submit(r Request) (ReqID, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var err error
	mmErr := checkMM(r.MM, len(r.Prompt))
	switch {
	case e.closed:
		err = ErrClosed
	case len(r.Prompt) == 0:
		err = ErrEmptyPrompt
	case mmErr != nil:
		err = mmErr
	case r.MaxTokens < 1:
		err = ErrMaxTokens
	case r.MaxTokens > e.pool.usable*e.cfg.BlockSize-len(r.Prompt): // the sum could overflow
		err = fmt.Errorf("%w: %d prompt + %d output tokens need more than %d blocks of %d",
			ErrTooLong, len(r.Prompt), r.MaxTokens, e.pool.usable, e.cfg.BlockSize)
	case e.hy != nil && e.hybridPeakBlocks(len(r.Prompt)+r.MaxTokens) > e.pool.usable:
		err = fmt.Errorf("%w: %d prompt + %d output tokens may hold %d blocks of %d across the KV-cache groups, more than the %d they share",
			ErrTooLong, len(r.Prompt), r.MaxTokens, e.hybridPeakBlocks(len(r.Prompt)+r.MaxTokens), e.cfg.BlockSize, e.pool.usable)
	}
	if err != nil {
		e.stats.RequestRejected++
		return 0, err
	}
	e.nextID++
	s := &seq{id: e.nextID, req: r, promptLen: len(r.Prompt), seed: promptSeed(r.Prompt)}
	s.tokens = make([]uint32, len(r.Prompt), len(r.Prompt)+r.MaxTokens)
	copy(s.tokens, r.Prompt)
	s.req.Prompt = nil
	if e.realtime {
		s.arrival = time.Now()
	} else {
		s.arrival = e.now
	}
	e.byID[s.id] = s
	e.waiting = append(e.waiting, s)
	e.signal()
	return s.id, nil
}

// Abort cancels a waiting or running request: its blocks are released (and stay
// cached, as in vLLM) and OnDone reports ErrAborted at the next advance. It
// returns false if the request is unknown or already finished.
func (e *Engine) Abort(id ReqID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.byID[id]
	if !ok {
		return false
	}
	e.finishLocked(s, e.clockLocked(), FinishAbort, ErrAborted)
	e.signal()
	return true
}

// ResetPrefixCache drops every cached block hash, like vLLM's
// /reset_prefix_cache. It succeeds only when no request holds blocks (nothing
// running); then AllBlocksCleared is published at the next advance, or, when
// a step is in flight (its requests aborted), after that step's events in
// its batch.
func (e *Engine) ResetPrefixCache() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || !e.pool.reset() {
		return false
	}
	switch {
	case e.cfg.Sink == nil:
	case e.inflight:
		// The step in flight cached blocks the reset just dropped: the
		// clear goes out after their stores, in that step's batch, as
		// vLLM's event queue orders them.
		e.pending = append(e.pending, Event{Type: AllBlocksCleared})
	default:
		e.batches = append(e.batches, EventBatch{Time: e.clockLocked(), Events: []Event{{Type: AllBlocksCleared}}})
	}
	e.signal()
	return true
}

// Stats returns a snapshot of the counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Running, s.Waiting = len(e.running), len(e.waiting)
	s.FreeBlocks = e.pool.free
	s.CachedBlocks = e.pool.numCachedBlocks()
	return s
}

// NextEventTime reports when the engine next needs AdvanceTo: the end of the
// step in flight, or Now when work (or an undelivered callback) is pending. It
// returns false when the engine is idle. Virtual mode only; in real time it
// reports the same but the engine's own goroutine acts on it.
func (e *Engine) NextEventTime() (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.nextLocked()
}

func (e *Engine) nextLocked() (time.Time, bool) {
	switch {
	case e.closed:
		return time.Time{}, false
	case e.inflight:
		return e.stepEnd, true
	case len(e.notes) > 0 || len(e.batches) > 0 || len(e.running) > 0:
		return e.now, true
	case len(e.waiting) > 0 && !e.stalled:
		return e.now, true
	}
	return time.Time{}, false
}

// AdvanceTo moves a virtual clock to t: it completes every step ending at or
// before t, starting the next step as soon as the previous one ends (or, when
// idle, at the current time), then delivers callbacks and event batches. A t
// before Now is treated as Now. In real-time mode it does nothing.
func (e *Engine) AdvanceTo(t time.Time) {
	if e.realtime {
		return
	}
	e.advance(t)
}

// RunUntilIdle advances a virtual clock until no work is left and returns the
// time then. In real-time mode it returns time.Now without doing anything.
func (e *Engine) RunUntilIdle() time.Time {
	if e.realtime {
		return time.Now()
	}
	for {
		t, ok := e.NextEventTime()
		if !ok {
			return e.Now()
		}
		e.advance(t)
	}
}

// Close aborts every request (OnDone reports ErrClosed), stops the real-time
// goroutine and unregisters the metrics. It is idempotent.
func (e *Engine) Close() {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		close(e.stop)
		<-e.done
		e.mu.Lock()
		now := e.clockLocked()
		for len(e.running) > 0 {
			e.finishLocked(e.running[0], now, FinishAbort, ErrClosed)
		}
		for len(e.waiting) > 0 {
			e.finishLocked(e.waiting[0], now, FinishAbort, ErrClosed)
		}
		e.inflight = false
		e.deliverUnlock()
		if e.unreg != nil {
			e.unreg()
		}
		e.log.Info("simulated engine closed", "model", e.cfg.Model)
	})
}

func (e *Engine) clockLocked() time.Time {
	if e.realtime {
		return time.Now()
	}
	return e.now
}

func (e *Engine) signal() {
	e.stalled = false // called with e.mu held, on every change that may unblock
	if e.realtime {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
}

// advance runs the clock to t and delivers what it produced.
func (e *Engine) advance(t time.Time) {
	e.mu.Lock()
	if !e.closed || !e.realtime {
		e.advanceLocked(t)
	}
	e.deliverUnlock()
}

func (e *Engine) advanceLocked(t time.Time) {
	if t.Before(e.now) {
		t = e.now
	}
	for !e.closed {
		if e.inflight {
			if e.stepEnd.After(t) {
				break
			}
			e.now = e.stepEnd
			e.finishStepLocked(e.stepEnd)
			continue
		}
		if len(e.running) == 0 && len(e.waiting) == 0 {
			break
		}
		start := e.now
		for _, s := range e.waiting {
			if s.arrival.After(start) && !s.arrival.After(t) {
				start = s.arrival // real time: the clock was stale while idle
			}
		}
		if !e.beginStepLocked(start) {
			break
		}
	}
	if t.After(e.now) {
		e.now = t
	}
}

// deliverUnlock takes the pending notifications and batches, releases e.mu and
// delivers them in order under deliverMu.
func (e *Engine) deliverUnlock() {
	notes, batches := e.notes, e.batches
	e.deliverMu.Lock()
	// The notes array delivered last time is empty again: fill it next, so a
	// busy engine does not grow a new array on every step.
	e.notes, e.batches, e.spareNotes = e.spareNotes[:0], nil, nil
	e.mu.Unlock()
	defer e.deliverMu.Unlock()
	for _, b := range batches {
		e.cfg.Sink.PublishKVEvents(b)
	}
	for i := range notes {
		n := &notes[i]
		if n.done {
			if n.onDone != nil {
				n.onDone(n.res)
			}
		} else if n.onToken != nil {
			n.onToken(n.tok)
		}
	}
	clear(notes) // drop the callbacks' and results' references
	e.spareNotes = notes[:0]
}

// run is the real-time loop: it sleeps until the next step boundary, or until
// Submit, Abort or ResetPrefixCache wakes it, and advances to time.Now.
func (e *Engine) run() {
	defer close(e.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-e.stop:
			return
		default:
		}
		next, ok := e.NextEventTime()
		if !ok {
			select {
			case <-e.wake:
				continue
			case <-e.stop:
				return
			}
		}
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-e.wake:
				timer.Stop()
				continue
			case <-e.stop:
				return
			}
		}
		e.advance(time.Now())
	}
}
