package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// Result is the outcome of one policy on one run.
type Result struct {
	Workload WorkloadKind `json:"workload"`
	Policy   Policy       `json:"policy"`
	Load     float64      `json:"load"`
	// OfferedQPS is the open-loop request rate (for MultiTurn, the rate the
	// session arrivals would produce if turns followed without delay).
	OfferedQPS float64 `json:"offeredQPS"`
	// Requests were routed; Completed finished with all their tokens.
	Requests  int `json:"requests"`
	Completed int `json:"completed"`
	// HitRate is the engines' prefix-cache hit rate: Σ prefix_cache_hits /
	// Σ prefix_cache_queries over the fleet, the vllm:prefix_cache_* ratio.
	HitRate float64 `json:"hitRate"`
	// BoundHitRate is the capacity bound on HitRate for this run's trace:
	// the hit rate of one pooled cache as large as the whole fleet's KV
	// cache under Belady's optimal replacement, every block of a prompt
	// (capped like the engine caps a hit: the last prompt token is always
	// recomputed) a hit if the pooled cache holds it. No routing over the
	// fleet can reuse more.
	BoundHitRate float64 `json:"boundHitRate"`
	// LRUBoundHitRate is the LRU-residency bound on HitRate for this run's
	// trace (bound_lru.go): the capacity bound with the pooled cache
	// shrunk by the blocks no future request reuses that the engines' LRU
	// must still hold (each engine keeps its last requests whole, answers
	// included). At most BoundHitRate; equal when every request's blocks
	// are all reused (LRUShape.MinDead = 0).
	LRUBoundHitRate float64 `json:"lruBoundHitRate"`
	// LRUShape is what the LRU-residency bound measured on the trace.
	LRUShape LRUShape `json:"lruShape"`
	// InfiniteHitRate is the reuse ceiling without capacity: every request
	// reuses the longest prefix any earlier request left behind (infinite
	// caches, perfect routing). It exceeds BoundHitRate when the working
	// set does not fit the fleet's cache.
	InfiniteHitRate float64 `json:"infiniteHitRate"`
	// PooledLRUHitRate is a reference, not a bound: the hit rate of the
	// same pooled cache under LRU, keeping every block it sees (answers'
	// blocks included) as each engine's prefix cache does.
	PooledLRUHitRate float64 `json:"pooledLRUHitRate"`
	// Misses decomposes BoundHitRate − HitRate: replacement, placement,
	// routing and in-flight shares, plus the compulsory misses.
	Misses *Misses `json:"misses,omitempty"`
	// OneEngineHitRate is a reference, not a bound: the hit rate of the
	// same workload at the same load served by one simulated engine with
	// the whole fleet's KV cache, step budget, sequences and compute — the
	// fleet as if routing could pool its caches, with the engines' own
	// replacement (LRU, tail blocks first) and prefix-only hits. Sweep fills
	// it; 0 when unknown.
	OneEngineHitRate float64 `json:"oneEngineHitRate,omitempty"`
	// Time to first token percentiles, from arrival at the engine.
	TTFTP50 time.Duration `json:"ttftP50"`
	TTFTP90 time.Duration `json:"ttftP90"`
	TTFTP99 time.Duration `json:"ttftP99"`
	// Throughput is completed requests per second of virtual time, from
	// the first arrival to the last completion.
	Throughput float64 `json:"throughput"`
	// Imbalance is max/mean over engines of the prompt tokens each engine
	// actually computed (prompt tokens minus prefix-cache hits): 1 is
	// perfectly even.
	Imbalance float64 `json:"imbalance"`
	// Preemptions is the engines' recompute preemptions (KV blocks ran
	// out); Makespan is the virtual time from the first arrival to the last
	// completion.
	Preemptions uint64        `json:"preemptions"`
	Makespan    time.Duration `json:"makespan"`
	// EventsApplied counts the KV events the kvroute policy's index (of
	// gateway replica 0) applied; EventsDropped those it could not apply
	// (a store whose parent hash the index no longer knows, a removal of an
	// unknown group, a payload that failed to decode).
	EventsApplied int `json:"eventsApplied"`
	EventsDropped int `json:"eventsDropped"`
	// Wall is the host time the run took.
	Wall time.Duration `json:"wall"`
	// CacheError compares, for the kvroute policy, the cached tokens its
	// index predicted on the chosen endpoint with those the engine served
	// (hybrid.go); nil for other policies.
	CacheError *CacheError `json:"cacheError,omitempty"`
}

// ErrStalled is returned when a run stops making progress or passes
// Config.MaxVirtualTime.
var ErrStalled = errors.New("sim: run stalled")

// run is the state of one policy on one run.
type run struct {
	cfg     Config
	policy  Policy
	tr      *trace
	now     time.Time
	start   time.Time
	engines []*simengine.Engine
	ids     []string
	rts     []router   // one per gateway replica
	events  *eventPath // event-fed policies only
	audit   *missAudit // the fleet's caches as they are, for Result.Misses
	pending timeQueue[arrival]
	reqs    []*request
	gateway *rand.Rand        // spreads requests over gateway replicas
	turn    int               // the next replica with RoundRobinReplicas
	later   timeQueue[func()] // SharedState.LeaderRTT: load changes on their way to the leader (leader.go)
	shared  *sharedPool       // Config.SharedState (sharedstate.go)
	diag    *diagnostics      // tests only: shared tie-break source, instant sharing, pick trace (diag.go)

	oracleSeen    map[kvindex.Key]struct{}
	oracleHits    int64
	oracleQueries int64
	bound         boundTrace
	boundReq      map[*request]int32 // request → its number in bound, until it finishes
	keys          []kvindex.Key
	cacheErr      cacheErrAcc // predicted vs served cached tokens (hybrid.go)
}

// Run simulates one policy on cfg and returns its result. The same cfg
// gives the same prompts and open-loop arrivals to every policy.
func Run(cfg Config, policy Policy) (Result, error) { return runWith(cfg, policy, nil) }

// runWith is Run with the tests' diagnostics (nil: none).
func runWith(cfg Config, policy Policy, diag *diagnostics) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	wall := time.Now()
	r := &run{cfg: cfg, policy: policy, start: simengine.DefaultStart, oracleSeen: map[kvindex.Key]struct{}{}, boundReq: map[*request]int32{}, diag: diag}
	r.now = r.start
	r.ids = endpointIDs(cfg.Fleet.Engines)
	r.gateway = rand.New(rand.NewPCG(cfg.Seed, 0x6a))
	r.tr = newTrace(cfg, r.start)
	defer r.teardown()
	if err := r.setup(); err != nil {
		return Result{}, err
	}
	for _, a := range r.tr.open {
		r.push(a)
	}
	if err := r.loop(); err != nil {
		return Result{}, err
	}
	res := r.result()
	if diag != nil {
		diag.reqs = r.reqs // the session study's stickiness (session_study.go)
		diag.bound, diag.queries = &r.bound, r.oracleQueries
	}
	res.CacheError = r.cacheErr.result()
	res.Wall = time.Since(wall)
	return res, nil
}

func (r *run) setup() error {
	f := r.cfg.Fleet
	audit, err := newMissAudit(r.ids, f.BlockSize)
	if err != nil {
		return err
	}
	r.audit = audit
	if r.policy.eventFed() {
		r.events = &eventPath{delay: r.cfg.EventDelay, ids: r.ids, dec: wire.NewDecoder(wire.Limits{}), ignoreGroups: r.cfg.IgnoreCacheGroups}
	}
	sink := func(i int) simengine.EventSink {
		return simengine.EventSinkFunc(func(b simengine.EventBatch) {
			r.audit.observe(i, b)
			if r.events != nil {
				r.events.publish(i, b)
			}
		})
	}
	// Every gateway replica runs its own instance of the policy. (A future
	// option for several kvroute Router replicas sharing one gateway's
	// traffic belongs here too: one newPolicy call per replica.)
	if r.shared, err = r.newSharedPool(); err != nil {
		return err
	}
	for g := 0; g < r.cfg.GatewayReplicas; g++ {
		rt, err := r.newPolicy(g)
		if err != nil {
			return err
		}
		r.rts = append(r.rts, rt)
	}
	if err := r.startShared(); err != nil {
		return err
	}
	for i := 0; i < f.Engines; i++ {
		ec := simengine.Config{
			Model: simModel, BlockSize: f.BlockSize, NumGPUBlocks: f.NumGPUBlocks,
			MaxNumBatchedTokens: f.MaxNumBatchedTokens, MaxNumSeqs: f.MaxNumSeqs,
			PrefillTokensPerSecond: f.PrefillTokensPerSecond, DecodeStep: f.DecodeStep,
			TimeScale: 1 / r.cfg.Workload.speed(i, f.Engines), Start: r.start, Hybrid: f.Hybrid,
		}
		if f.DecodeStep == 0 {
			ec.DecodeStep = time.Nanosecond // the engine treats 0 as "default"
		}
		ec.Sink = sink(i)
		e, err := simengine.New(ec, simengine.Options{})
		if err != nil {
			return err
		}
		r.engines = append(r.engines, e)
	}
	return nil
}

// newPolicy builds gateway replica g's instance of the run's policy and,
// for an event-fed policy, subscribes its index to the event path.
func (r *run) newPolicy(g int) (router, error) {
	seed := r.cfg.Seed + uint64(g)<<32 + r.cfg.TieSeed*0x9e3779b97f4a7c15
	clock := func() time.Time { return r.now }
	subscribe := func(ix *kvindex.Index, onBatch func(int, *wire.Batch)) error {
		a, err := kvevents.NewApplier(kvevents.ApplierConfig{Model: simModel}, ix, kvevents.Options{})
		if err != nil {
			return err
		}
		r.events.subs = append(r.events.subs, eventSub{applier: a, onBatch: onBatch})
		return nil
	}
	if r.policy.isSessionPolicy() { // session.go
		return r.newSessionPolicy(seed, clock, func(ix *kvindex.Index) error { return subscribe(ix, nil) })
	}
	if r.policy.isKVRoute() {
		var join func(*kvindex.Index, *tokenload.Tracker) (*cluster.Replica, error)
		if r.shared != nil {
			join = r.shared.join(g)
		}
		kr, err := newKVRouter(r.cfg, r.ids, clock, seed, r.policy, r.diag.sharedRandom(), join)
		if err != nil {
			return nil, err
		}
		if r.cfg.KVRoutePeerLoadFromMetrics {
			kr.scrapePeers(r.queue, clock, r.cfg.ScrapeInterval)
		}
		if err := subscribe(kr.r.Index(), nil); err != nil {
			kr.close()
			return nil, err
		}
		return kr, nil
	}
	switch r.policy {
	case Dynamo, SGLangEvents, LMetric:
		ix, err := kvindex.New(kvindex.Config{BlockSize: r.cfg.Fleet.BlockSize, SweepInterval: -1}, kvindex.Options{Set: telemetry.Set{Clock: virtualClock{now: clock}}})
		if err != nil {
			return nil, err
		}
		var rt router
		var hook func(int, *wire.Batch)
		switch r.policy {
		case Dynamo:
			rt = newDynamo(r.cfg, r.ids, ix, clock, seed)
		case LMetric:
			l := newLMetric(r.cfg, r.ids, ix, clock, seed)
			hook = cachedHook(l.cachedDelta)
			rt = l
		default:
			s := newSGLang(r.cfg, r.ids, ix, clock)
			hook = cachedHook(s.cachedDelta)
			rt = s
		}
		if err := subscribe(ix, hook); err != nil {
			rt.close()
			return nil, err
		}
		return rt, nil
	case SGLang:
		return newSGLang(r.cfg, r.ids, nil, clock), nil
	case Approximate:
		return newApprox(r.cfg, clock, r.scrape, seed), nil
	case LeastLoad:
		return newLeastLoad(r.ids)
	case RoundRobin:
		return &roundRobin{n: r.cfg.Fleet.Engines, next: g % r.cfg.Fleet.Engines}, nil
	}
	return nil, fmt.Errorf("%w: unknown policy %q", ErrInvalidConfig, r.policy)
}

// cachedHook turns the engines' decoded events into a policy's count of
// each engine's cached blocks (delta in blocks; reset on a clear).
func cachedHook(delta func(i, blocks int, reset bool)) func(int, *wire.Batch) {
	return func(i int, b *wire.Batch) {
		for _, e := range b.Events {
			switch e.Type {
			case wire.EventBlockStored:
				delta(i, len(e.BlockHashes), false)
			case wire.EventBlockRemoved:
				delta(i, -len(e.BlockHashes), false)
			case wire.EventAllBlocksCleared:
				delta(i, 0, true)
			}
		}
	}
}

// scrape returns engine i's waiting requests and KV-cache usage, the two
// vLLM metrics a load-aware gateway scrapes.
func (r *run) scrape(i int) (waiting int, usage float64) {
	st := r.engines[i].Stats()
	return st.Waiting, 1 - float64(st.FreeBlocks)/float64(max(st.NumBlocks, 1))
}

// queue returns engine i's waiting and running requests, as vLLM's
// num_requests_waiting and num_requests_running report them.
func (r *run) queue(i int) (waiting, running int) {
	st := r.engines[i].Stats()
	return st.Waiting + st.Deferred, st.Running
}

func (r *run) teardown() {
	for _, e := range r.engines {
		e.Close()
	}
	for _, rt := range r.rts {
		rt.close()
	}
	if r.audit != nil {
		r.audit.close()
	}
}

func (r *run) push(a arrival) {
	r.pending.push(a.at, a)
}

// loop advances the virtual clock from event to event: KV-event deliveries
// first (so a delivery due at t is visible to a decision at t), then engine
// steps ending at t (which report first tokens and completions), then
// arrivals at t.
func (r *run) loop() error {
	deadline := r.start.Add(r.cfg.MaxVirtualTime)
	idle := 0
	for {
		next, ok := r.nextTime()
		if !ok {
			return nil
		}
		if next.Before(r.now) {
			next = r.now
		}
		if next.Equal(r.now) {
			if idle++; idle > 1_000_000 {
				return fmt.Errorf("%w: no progress at %v", ErrStalled, r.now.Sub(r.start))
			}
		} else {
			idle = 0
		}
		if next.After(deadline) {
			return fmt.Errorf("%w: virtual time passed %v", ErrStalled, r.cfg.MaxVirtualTime)
		}
		r.now = next
		if r.events != nil {
			r.events.deliver(r.now)
		}
		if r.shared != nil {
			r.shared.advance(r.now)
		}
		for _, e := range r.engines {
			if t, ok := e.NextEventTime(); ok && !t.After(r.now) {
				e.AdvanceTo(r.now)
			}
		}
		for fn, ok := r.later.popDue(r.now); ok; fn, ok = r.later.popDue(r.now) {
			fn()
		}
		for a, ok := r.pending.popDue(r.now); ok; a, ok = r.pending.popDue(r.now) {
			if err := r.arrive(a); err != nil {
				return err
			}
		}
	}
}

// nextTime is the earliest pending delivery, engine step or arrival.
func (r *run) nextTime() (time.Time, bool) {
	var next time.Time
	found := false
	consider := func(t time.Time) {
		if !found || t.Before(next) {
			next, found = t, true
		}
	}
	if r.events != nil {
		if t, ok := r.events.next(); ok {
			consider(t)
		}
	}
	for _, e := range r.engines {
		if t, ok := e.NextEventTime(); ok {
			consider(t)
		}
	}
	if t, ok := r.pending.next(); ok {
		consider(t)
	}
	if t, ok := r.later.next(); ok {
		consider(t)
	}
	if r.shared != nil { // its periodic ticks only while other work remains
		if t, ok := r.shared.next(found); ok {
			consider(t)
		}
	}
	return next, found
}

// arrive routes one request and submits it to the chosen engine.
func (r *run) arrive(a arrival) error {
	if r.cfg.Workload.Kind == Trace && a.prompt == nil {
		a.prompt = tracePrompt(r.cfg.Workload.Trace, a.trace)
	}
	maxTokens := r.cfg.Workload.OutputTokens
	if a.outputTokens > 0 {
		maxTokens = a.outputTokens
	}
	rq := &request{arrival: a}
	switch {
	case a.forwardedFrom > 0:
		rq.replica = 0
	case r.cfg.RoundRobinReplicas:
		rq.replica, r.turn = r.turn, (r.turn+1)%len(r.rts)
	default:
		rq.replica = r.gateway.IntN(len(r.rts))
	}
	if r.forward(a, rq.replica) {
		return nil
	}
	r.boundReq[rq] = r.oracle(a.prompt)
	rq.note = r.audit.arrive(a.prompt)
	rt := r.rts[rq.replica]
	r.shared.beforePick(r, rq.replica)
	r.diag.beforePick(r, rq)
	i, err := rt.pick(rq)
	if err != nil {
		return fmt.Errorf("sim: %s pick: %w", r.policy, err)
	}
	rq.engine = i
	r.diag.afterPick(r, rq, i)
	if r.shared != nil {
		r.shared.queued(rq.replica, r.now)
		r.shared.instant(r.now)
		r.diag.sync(r)
	}
	var why *routedBy
	if rq.decision != nil {
		why = &routedBy{outcome: rq.decision.Outcome}
	}
	r.audit.picked(rq.note, i, why)
	r.reqs = append(r.reqs, rq)
	e := r.engines[i]
	e.AdvanceTo(r.now)
	_, err = e.Submit(simengine.Request{
		Prompt: a.prompt, MaxTokens: maxTokens,
		OnToken: func(t simengine.TokenEvent) {
			if t.Index == 0 {
				r.reportChange(rq, func() { rt.firstToken(rq) })
			}
		},
		OnDone: func(res simengine.Result) { r.finished(rq, res) },
	})
	if err != nil {
		return fmt.Errorf("sim: submit to engine %d: %w", i, err)
	}
	return nil
}

// changed follows a request's first chunk or end: its replica's load
// changed, and with shared state that change is queued for the peers.
func (r *run) changed(rq *request) {
	if r.shared != nil {
		r.shared.queued(rq.replica, r.now)
		r.shared.instant(r.now)
		r.diag.sync(r)
	}
}

// finished records a request's outcome and, for a chat session, schedules
// its next turn.
func (r *run) finished(rq *request, res simengine.Result) {
	r.cacheErr.add(rq, res, r.cfg.Fleet.BlockSize)
	r.reportChange(rq, func() { r.rts[rq.replica].done(rq) })
	rq.finished, rq.finish = true, res.Finish
	id := r.boundReq[rq]
	delete(r.boundReq, rq)
	if res.Err != nil {
		rq.failed = true
		return
	}
	rq.ttft = res.TTFT()
	// What this request leaves reusable: its prompt and the answer's
	// computed tokens (the last token's KV is never computed).
	if n := len(res.OutputTokens) - 1; n > 0 {
		r.keys = keysOf(r.keys, append(slices.Clip(rq.prompt), res.OutputTokens[:n]...), r.cfg.Fleet.BlockSize)
		for _, k := range r.keys {
			r.oracleSeen[k] = struct{}{}
		}
		if p := len(rq.prompt) / r.cfg.Fleet.BlockSize; p < len(r.keys) {
			r.bound.addAnswer(r.keys[p:], id)
		}
	}
	if rq.session >= 0 {
		if next, think, ok := r.tr.nextTurn(rq.session, rq.turn, rq.prompt, res.OutputTokens); ok {
			r.push(arrival{at: res.Finish.Add(think), prompt: next, session: rq.session, turn: rq.turn + 1})
		}
	}
	if r.cfg.Workload.Kind == Trace {
		rq.prompt = nil // a trace's prompts average 15,000 tokens: keep only those in flight
	}
}

// oracle adds a prompt to the infinite-cache ceiling (its longest prefix
// that an earlier request left reusable, capped like the engine's hit) and
// its blocks to the capacity bound's reference string, and returns the
// request's number there.
func (r *run) oracle(prompt []uint32) int32 {
	bs := r.cfg.Fleet.BlockSize
	r.keys = keysOf(r.keys, prompt, bs)
	limit := (len(prompt) - 1) / bs
	hit := 0
	for hit < limit && hit < len(r.keys) {
		if _, ok := r.oracleSeen[r.keys[hit]]; !ok {
			break
		}
		hit++
	}
	r.oracleHits += int64(hit * bs)
	r.oracleQueries += int64(len(prompt))
	id := r.bound.request()
	r.bound.add(r.keys, limit, id)
	for _, k := range r.keys {
		r.oracleSeen[k] = struct{}{}
	}
	return id
}
