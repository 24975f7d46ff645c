package kvevents

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/replay"
	"github.com/kvroute/kvroute/telemetry"
)

// ErrPoolClosed is returned by Ensure after Close.
var ErrPoolClosed = errors.New("kvevents: pool closed")

// Pool keeps the KV-event subscriptions of a set of inference endpoints and
// applies their events to a kvindex.Index.
//
// In the default per-endpoint mode each endpoint passed to Ensure (and
// matching the selector) gets its own supervised SUB socket dialled to its
// PUB (see subscriber) and its own sequence tracking with replay (see
// stream). In bind mode (PoolConfig.BindAddress) a single SUB socket binds
// and engines connect to it; endpoints are identified by their topic.
//
// Messages are applied by Concurrency workers; each endpoint is pinned to
// one worker, so its messages apply in order, and queues are bounded.
// Methods are safe for concurrent use.
type Pool struct {
	cfg     PoolConfig
	sel     Selector
	match   func(labels map[string]string) bool // Options.Matcher, or sel.Matches
	ix      *kvindex.Index
	applier *Applier
	m       *eventMetrics
	sm      *streamMetrics
	rm      *resumeMetrics
	log     *slog.Logger
	zopts   zmqx.Options
	etr     *eventTracer // nil: KV-event spans off (see tracing.go)
	clock   telemetry.Clock

	ctx     context.Context
	cancel  context.CancelFunc
	workers []*worker
	stop    chan struct{}
	wwg     sync.WaitGroup

	applied      atomic.Uint64
	storedBlocks atomic.Uint64
	topicObs     atomic.Pointer[TopicObserver] // see ObserveTopics

	opMu sync.Mutex // serialises Ensure, Remove and Close

	mu      sync.Mutex
	closed  bool
	subs    map[string]*subscriber   // per-endpoint mode, by endpoint ID
	known   map[string]Endpoint      // bind mode: endpoints passed to Ensure
	bound   map[string]*stream       // bind mode: streams by endpoint ID
	closing map[string]chan struct{} // bind mode: streams being closed
	bind    *binder
	resume  map[string]Position // EnsureFrom: where the endpoint's next stream starts
}

// NewPool validates cfg and starts the workers (and, in bind mode, the bound
// socket) that apply events to ix. opts.Registerer receives the KV-event
// metrics (nil still keeps them, for Status, without exporting them);
// opts.Logger receives state changes.
func NewPool(cfg PoolConfig, ix *kvindex.Index, opts Options) (*Pool, error) {
	reg, lg := opts.Registerer, opts.Logger
	if ix == nil {
		return nil, errors.New("kvevents: NewPool needs an index")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	sel, _ := ParseSelector(cfg.Selector) // validated above
	match := sel.Matches
	if opts.Matcher != nil {
		if cfg.Selector != "" {
			return nil, errors.New("kvevents: set either PoolConfig.Selector or Options.Matcher, not both")
		}
		match = opts.Matcher
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if reg == nil {
		// Metrics are still kept (Status, tests), just not exported.
		reg = prometheus.NewRegistry()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	sm, err := newStreamMetrics(reg)
	if err != nil {
		return nil, err
	}
	ap, err := NewApplier(ApplierConfig{Model: cfg.Model, LoRANames: cfg.LoRANames}, ix, Options{metrics: m, Logger: lg})
	if err != nil {
		return nil, err
	}
	rm, err := newResumeMetrics(reg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{
		cfg: cfg, sel: sel, match: match, ix: ix, applier: ap, m: m, sm: sm, rm: rm, log: lg, resume: make(map[string]Position),
		zopts: subOptions(cfg),
		ctx:   ctx, cancel: cancel, stop: make(chan struct{}),
		subs: make(map[string]*subscriber), known: make(map[string]Endpoint), bound: make(map[string]*stream),
		closing: make(map[string]chan struct{}),
	}
	p.etr = newEventTracer(cfg.Tracing, opts.TracerProvider)
	p.clock = opts.Clock
	if p.clock == nil {
		p.clock = telemetry.Wall
	}
	m.PoolCapacity.Add(float64(cfg.Concurrency * cfg.QueueSize))
	for range cfg.Concurrency {
		w := newWorker(&cfg, m)
		p.workers = append(p.workers, w)
		p.wwg.Add(1)
		go func() {
			defer p.wwg.Done()
			w.run(p.stop)
		}()
	}
	if cfg.BindAddress != "" {
		p.bind = newBinder(p)
		go p.bind.run()
	}
	return p, nil
}

// Ensure subscribes to ep, or updates its subscription. It is idempotent:
// an unchanged endpoint keeps its subscriber (label changes that still
// match are just recorded). A changed events address, replay address or
// model replaces the subscriber and clears the endpoint's entries. An
// endpoint whose labels do not match the selector is treated like Remove.
// Errors report an invalid endpoint, or a closed pool.
func (p *Pool) Ensure(ep Endpoint) error { return p.ensure(ep, nil) }

// EnsureFrom is Ensure for an endpoint whose index entries were restored
// (from a checkpoint) up to pos: when it creates the endpoint's stream, the
// stream starts with pos as its watermark instead of empty, so that the
// first connection replays from pos.Seq, compares the batch there with
// pos.Digest, and either continues after it (the same engine lifetime) or
// treats the engine as restarted (clears the endpoint and rebuilds it from
// 0). An endpoint that already has a stream keeps it and pos is ignored.
// In bind mode pos applies to the endpoint's stream when its first message
// creates it.
func (p *Pool) EnsureFrom(ep Endpoint, pos Position) error { return p.ensure(ep, &pos) }

// Position returns the stream position of the endpoint with this ID (the
// last applied sequence and its payload digest): the one its last applied
// batch recorded in the index (kvindex.Index.Position), which index
// snapshots persist, or, before the stream first connects, the position it
// will resume from. ok is false for an unknown endpoint or one with nothing
// applied.
func (p *Pool) Position(id string) (pos Position, ok bool) {
	p.mu.Lock()
	var st *stream
	if s := p.subs[id]; s != nil {
		st = s.st
	} else {
		st = p.bound[id]
	}
	p.mu.Unlock()
	if st == nil {
		return Position{}, false
	}
	return st.position()
}

func (p *Pool) ensure(ep Endpoint, pos *Position) error {
	ep, err := ep.resolve(&p.cfg)
	if err != nil {
		return err
	}
	match := p.match(ep.Labels)
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrPoolClosed
	}
	if pos != nil && p.bound[ep.ID] == nil {
		p.resume[ep.ID] = *pos // consumed by the endpoint's next new stream
	}
	if p.bind != nil {
		p.known[ep.ID] = ep
		old := p.bound[ep.ID]
		replace := old != nil && (!match || old.cfgModel != ep.Model || old.replayAddr != ep.ReplayAddress)
		p.mu.Unlock()
		p.bind.gen.Add(1)
		if replace {
			p.closeBound(old, !match)
		}
		return nil
	}
	old := p.subs[ep.ID]
	if old != nil && match && old.ep.sameStream(ep) {
		old.ep.Labels = ep.Labels
		delete(p.resume, ep.ID)
		p.mu.Unlock()
		return nil
	}
	if old != nil {
		delete(p.subs, ep.ID)
	}
	var sub *subscriber
	if match {
		sub = p.newSubscriber(ep)
		p.subs[ep.ID] = sub
	}
	p.mu.Unlock()
	if old != nil {
		// A replaced endpoint's entries came from the old address or model.
		p.stopSubscriber(old, true, !match)
	}
	if sub != nil {
		go sub.run()
		sub.st.log.Debug("Endpoint ensured", "events", ep.EventsAddress, "replay", ep.ReplayAddress)
	}
	return nil
}

// Remove stops the subscription of the endpoint with this ID and removes
// its entries from the index. Unknown IDs are ignored. In bind mode an
// engine that keeps publishing is indexed again only with BindAnyTopic.
func (p *Pool) Remove(id string) {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.mu.Lock()
	sub := p.subs[id]
	delete(p.subs, id)
	delete(p.known, id)
	st := p.bound[id]
	p.mu.Unlock()
	if p.bind != nil {
		p.bind.gen.Add(1)
	}
	if sub != nil {
		p.stopSubscriber(sub, true, true)
	}
	if st != nil {
		p.closeBound(st, true)
	}
}

// Close stops every subscription, replay and worker and waits for them. The
// index keeps its entries (call Remove first to drop an endpoint's). It is
// idempotent.
func (p *Pool) Close() error {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	subs := make([]*subscriber, 0, len(p.subs))
	for _, s := range p.subs {
		subs = append(subs, s)
	}
	clear(p.subs)
	p.mu.Unlock()

	p.cancel()
	if p.bind != nil {
		<-p.bind.done // no stream is created after this
	}
	for _, s := range subs {
		p.stopSubscriber(s, false, false)
	}
	p.mu.Lock()
	bound := make([]*stream, 0, len(p.bound))
	for _, st := range p.bound {
		bound = append(bound, st)
	}
	clear(p.bound)
	p.mu.Unlock()
	for _, st := range bound {
		p.closeStream(st, false, false)
	}
	close(p.stop)
	p.wwg.Wait()
	p.m.PoolCapacity.Sub(float64(p.cfg.Concurrency * p.cfg.QueueSize))
	return nil
}

// closeBound closes a bind-mode stream and clears its entries. Until that
// is done the bind loop waits before creating a new stream for the same
// endpoint, so the old stream's Clear cannot hit the new one's entries.
func (p *Pool) closeBound(st *stream, forget bool) {
	done := make(chan struct{})
	p.mu.Lock()
	if p.bound[st.id] == st {
		delete(p.bound, st.id)
	}
	p.closing[st.id] = done
	p.mu.Unlock()
	p.closeStream(st, true, forget)
	p.mu.Lock()
	delete(p.closing, st.id)
	p.mu.Unlock()
	close(done)
}

// subOptions are the transport options of subscription sockets: heartbeats
// when enabled, else the idle deadline.
func subOptions(cfg PoolConfig) zmqx.Options {
	o := zmqx.Options{
		HandshakeTimeout: cfg.HandshakeTimeout,
		DialTimeout:      cfg.DialTimeout,
		MaxFrameSize:     cfg.MaxFrameSize,
	}
	if cfg.HeartbeatInterval > 0 {
		o.HeartbeatInterval, o.HeartbeatTimeout = cfg.HeartbeatInterval, cfg.HeartbeatTimeout
	} else {
		o.IdleTimeout = cfg.IdleTimeout
	}
	return o
}

// newSubscriber creates the subscriber of ep (counted as active from now
// until stopSubscriber); the caller starts its run loop.
func (p *Pool) newSubscriber(ep Endpoint) *subscriber {
	p.m.ActiveSubscribers.Inc()
	ctx, cancel := context.WithCancel(p.ctx)
	return &subscriber{p: p, ep: ep, st: p.newStreamLocked(ep.ID, ep.Model, ep.ReplayAddress),
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// stopSubscriber stops sub's socket loop and its stream.
func (p *Pool) stopSubscriber(sub *subscriber, clearIndex, forget bool) {
	sub.cancel()
	<-sub.done
	p.m.ActiveSubscribers.Dec()
	p.closeStream(sub.st, clearIndex, forget)
}

// newStreamLocked creates a stream on the least loaded worker.
func (p *Pool) newStreamLocked(id, model, replayAddr string) *stream {
	w := p.workers[0]
	for _, c := range p.workers[1:] {
		if c.streams < w.streams {
			w = c
		}
	}
	w.streams++
	w.setStreams(w.streams)
	st := newStream(p, id, model, replayAddr)
	st.w = w
	return st
}

// closeStream closes st; forget also drops its metric series and the
// Applier's memory of the endpoint (it left the pool).
func (p *Pool) closeStream(st *stream, clearIndex, forget bool) {
	st.close(clearIndex)
	p.mu.Lock()
	st.w.streams--
	st.w.setStreams(st.w.streams)
	p.mu.Unlock()
	if forget {
		p.applier.Forget(st.id)
		p.m.forgetEndpoint(st.id)
		p.sm.forget(st.id)
		p.mu.Lock()
		delete(p.resume, st.id)
		p.mu.Unlock()
	}
}

// replayClient returns a replay client that counts attempt failures for
// the endpoint id.
func (p *Pool) replayClient(id string) *replay.Client {
	cc := p.cfg.ReplayClient
	cc.OnSlotWait = func(d time.Duration) { p.sm.ReplaySlotWait.Observe(d.Seconds()) }
	next := cc.OnAttemptError
	cc.OnAttemptError = func(e *replay.Error) {
		if e.Op != replay.OpApply {
			p.m.ZMQErrors.WithLabelValues(id, e.Op).Inc()
		}
		if next != nil {
			next(e)
		}
	}
	c, err := replay.NewClient(cc, replay.Options{Logger: p.log})
	if err != nil {
		// cfg.ReplayClient was validated by NewPool; keep running without replay.
		p.log.Error("Replay client unavailable", "endpoint", id, "err", err)
		return nil
	}
	return c
}

// EndpointStatus is a point-in-time view of one endpoint's subscription.
type EndpointStatus struct {
	ID         string
	Connected  bool   // the SUB socket is connected; bind mode: an engine connection owns the endpoint
	Received   bool   // a message was received
	LastSeq    uint64 // last sequence received (wire watermark)
	HasApplied bool   // the index holds a contiguous run of the stream
	Applied    uint64 // last sequence applied (index watermark)
	Replaying  bool   // a replay is running
	Degraded   bool   // a gap without replay address, or one a replay gave up on: the index may hold stale blocks
	Messages   uint64 // messages applied, live and replayed
	Replay     string // replay address ("" = none)
	// Position is the watermark and the digest of the batch applied there
	// (meaningful with HasApplied and HasDigest).
	Position  Position
	HasDigest bool
	// ReplayingSince is when the running replay started (zero when none):
	// an endpoint stuck in a replay shows here and in
	// kvroute_kv_events_replay_in_progress.
	ReplayingSince time.Time
	// State is the stream's readiness: connecting, replaying, live or
	// degraded (see StreamState), and Since when the stream entered it, on
	// the pool's clock (Options.Clock).
	State StreamState
	Since time.Time
	// Phase is the stream's state-machine phase (connecting, resuming,
	// live, replaying or closed; see the package doc) and PhaseSince when it
	// entered it.
	Phase      string
	PhaseSince time.Time
	// LastApplied is when the last batch was applied (zero: never).
	LastApplied time.Time
}

// Status returns the state of the endpoint with this ID.
func (p *Pool) Status(id string) (EndpointStatus, bool) {
	p.mu.Lock()
	var st *stream
	if s := p.subs[id]; s != nil {
		st = s.st
	} else {
		st = p.bound[id]
	}
	p.mu.Unlock()
	if st == nil {
		return EndpointStatus{}, false
	}
	return st.status(), true
}

// Endpoints returns the IDs of the endpoints with a subscription (per
// endpoint mode) or a stream (bind mode), sorted.
func (p *Pool) Endpoints() []string {
	p.mu.Lock()
	ids := make([]string, 0, len(p.subs)+len(p.bound))
	for id := range p.subs {
		ids = append(ids, id)
	}
	for id := range p.bound {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// PoolStats are pool-wide counters since NewPool.
type PoolStats struct {
	Applied      uint64 // messages applied to the index (live and replayed)
	StoredBlocks uint64 // blocks of BlockStored events the index accepted
}

// Stats returns the pool-wide counters.
func (p *Pool) Stats() PoolStats {
	return PoolStats{Applied: p.applied.Load(), StoredBlocks: p.storedBlocks.Load()}
}

// metrics returns the pool's metric set (shared with its Applier).
func (p *Pool) metrics() *eventMetrics { return p.m }

// BindAddr returns the address the bind-mode socket listens on
// ("tcp://127.0.0.1:41234", useful with port 0), or "" when the pool is not
// in bind mode or not bound yet.
func (p *Pool) BindAddr() string {
	if p.bind == nil {
		return ""
	}
	return p.bind.address(0)
}

// BindAddrs returns the addresses of the bind-mode sockets, one per
// data-parallel rank (PoolConfig.BindRanks), "" for a rank not bound yet;
// nil when the pool is not in bind mode.
func (p *Pool) BindAddrs() []string {
	if p.bind == nil {
		return nil
	}
	out := make([]string, len(p.bind.addrs))
	for r := range out {
		out[r] = p.bind.address(r)
	}
	return out
}
