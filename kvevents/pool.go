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

// errPoolClosed is returned by Ensure after Close.
var errPoolClosed = errors.New("kvevents: pool closed")

// Pool keeps the KV-event subscriptions of a set of inference endpoints and
// applies their events to a kvindex.Index.
//
// Each endpoint has a stream (sequence tracking with replay; see stream).
// Its messages come from the pool's source (see source): in the default
// per-endpoint mode a dialer gives each endpoint passed to Ensure (and
// matching Options.Matcher) its own supervised SUB socket dialled to its PUB
// (see subscriber); in bind mode (PoolConfig.BindAddress) a binder binds a
// SUB socket engines connect to, and endpoints are identified by their
// topic.
//
// Messages are applied by Concurrency workers; each endpoint is pinned to
// one worker, so its messages apply in order, and queues are bounded.
// Methods are safe for concurrent use.
//
// Ownership: NewPool starts the workers (counted in wwg, ended by closing
// stop) and, in bind mode, the binder's loop, which runs one goroutine per
// rank and one per admitted engine connection (bounded, see admitConn)
// and closes the binder's done once they have all ended. In per-endpoint
// mode Ensure starts each endpoint's subscriber goroutine, which Remove,
// a replacing Ensure and Close cancel and wait for (subscriber.done).
// Each stream's replay and snapshot goroutines are its own (see stream),
// ended by closing the stream. What a stream has applied changes only on
// its worker's goroutine; mu guards closed, streams and resume, and the
// binder's known and closing maps; opMu serialises Ensure, Remove and
// Close, so no subscriber starts after Close. Close cancels ctx (ending
// every subscriber and bind connection), waits for the source, closes every
// stream (waiting for its replays), then closes stop and waits for the
// workers. applied, storedBlocks and topicObs are atomics; the other
// fields are set by NewPool and not written after.
type Pool struct {
	cfg     PoolConfig
	match   func(labels map[string]string) bool // Options.Matcher, or every endpoint
	ix      *kvindex.Index
	applier *Applier
	m       *eventMetrics
	sm      *streamMetrics
	snm     *snapshotMetrics // engine snapshot loads (stream_snapshot.go)
	rm      *resumeMetrics
	reg     *registrar // the collectors this Pool registered, which Close unregisters
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

	opMu        sync.Mutex          // serialises Ensure, Remove and Close
	notSelected map[string]struct{} // endpoints Ensure was given that Options.Matcher refused; under opMu

	src source // dialer, or binder in bind mode

	mu      sync.Mutex
	closed  bool
	streams map[string]*stream  // every endpoint's stream, by ID, whichever source feeds it
	resume  map[string]Position // EnsureFrom: where the endpoint's next stream starts
}

// matchAll is the matcher of a Pool without Options.Matcher: every
// endpoint is subscribed.
func matchAll(map[string]string) bool { return true }

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
	match := opts.Matcher
	if match == nil {
		match = matchAll
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if reg == nil {
		// Metrics are still kept (Status, tests), just not exported.
		reg = prometheus.NewRegistry()
	}
	// All or none: a failure unregisters what this Pool registered.
	r := &registrar{set: telemetry.Set{Registerer: reg}}
	m, err := newMetrics(r)
	if err != nil {
		r.unregister()
		return nil, err
	}
	sm, err := newStreamMetrics(r)
	if err != nil {
		r.unregister()
		return nil, err
	}
	rm, err := newResumeMetrics(r)
	if err != nil {
		r.unregister()
		return nil, err
	}
	snm, err := newSnapshotMetrics(r)
	if err != nil {
		r.unregister()
		return nil, err
	}
	ap, err := NewApplier(ApplierConfig{Model: cfg.Model, LoRANames: cfg.LoRANames}, ix, Options{Set: telemetry.Set{Logger: lg}, metrics: m.applyMetrics})
	if err != nil {
		r.unregister()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{
		cfg: cfg, match: match, ix: ix, applier: ap, m: m, sm: sm, rm: rm, snm: snm, reg: r, log: lg, resume: make(map[string]Position),
		ctx: ctx, cancel: cancel, stop: make(chan struct{}),
		streams: make(map[string]*stream),
	}
	p.etr = newEventTracer(cfg.Tracing, opts.TracerProvider)
	p.clock = opts.Clock
	if p.clock == nil {
		p.clock = telemetry.Wall
	}
	p.zopts = subOptions(cfg, p.clock)
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
		b := newBinder(p)
		p.src = b
		go b.run()
	} else {
		p.src = &dialer{p: p, subs: make(map[string]*subscriber)}
	}
	return p, nil
}

// Ensure subscribes to ep, or updates its subscription. It is idempotent:
// an unchanged endpoint keeps its subscriber (label changes that still
// match are just recorded). A changed events address, replay address or
// model replaces the subscriber and clears the endpoint's entries. An
// endpoint whose labels do not match Options.Matcher is treated like Remove.
// Errors report an invalid endpoint, or a closed pool.
func (p *Pool) Ensure(ep Endpoint) error { return p.ensure(ep, nil) }

// EnsureFrom is Ensure for an endpoint whose index entries were restored
// (from a checkpoint) up to pos: when it creates the endpoint's stream, the
// stream starts with pos as its watermark instead of empty, so that the
// first connection replays from pos.Seq, compares the batch there with
// pos.Digest, and either continues after it (the same engine lifetime) or
// treats the engine as restarted (clears the endpoint and rebuilds it from
// 0). pos is ignored for an endpoint that already has a stream (kept, or
// replaced and its entries cleared) or does not match Options.Matcher. In
// bind mode pos applies to the endpoint's stream when its first message
// creates it, and is dropped if the endpoint is removed or relabelled out
// of the matcher first.
func (p *Pool) EnsureFrom(ep Endpoint, pos Position) error { return p.ensure(ep, &pos) }

// Position returns the stream position of the endpoint with this ID (the
// last applied sequence and its payload digest): the one its last applied
// batch recorded in the index (kvindex.Index.Position), which index
// snapshots persist, or, before the stream first connects, the position it
// will resume from. ok is false for an unknown endpoint or one with nothing
// applied.
func (p *Pool) Position(id string) (pos Position, ok bool) {
	st := p.stream(id)
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
		return errPoolClosed
	}
	after := p.src.ensureLocked(ep, match, pos)
	p.mu.Unlock()
	after()
	p.markSelected(ep.ID, match)
	return nil
}

// markSelected records whether the endpoint with this ID is one Options.Matcher
// refused, for kvroute_kv_events_endpoints_not_selected. It runs under opMu.
func (p *Pool) markSelected(id string, selected bool) {
	_, was := p.notSelected[id]
	switch {
	case !selected && !was:
		if p.notSelected == nil {
			p.notSelected = map[string]struct{}{}
		}
		p.notSelected[id] = struct{}{}
		p.m.NotSelected.Inc()
	case selected && was:
		delete(p.notSelected, id)
		p.m.NotSelected.Dec()
	}
}

// Remove stops the subscription of the endpoint with this ID and removes
// its entries from the index. Unknown IDs are ignored. In bind mode an
// engine that keeps publishing is indexed again only with BindAnyTopic.
func (p *Pool) Remove(id string) {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.mu.Lock()
	after := p.src.removeLocked(id)
	p.mu.Unlock()
	after()
	p.markSelected(id, true) // no longer known
}

// Close stops every subscription, replay and worker, waits for them and
// unregisters the metrics this Pool registered (not those it reused from
// another Pool on the same registry). The index keeps its entries (call
// Remove first to drop an endpoint's). It is idempotent.
func (p *Pool) Close() error {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()

	p.cancel()
	p.src.close() // no stream is created after this
	p.mu.Lock()
	streams := make([]*stream, 0, len(p.streams))
	for _, st := range p.streams {
		streams = append(streams, st)
	}
	p.mu.Unlock()
	for _, st := range streams {
		p.closeStream(st, false, false)
	}
	close(p.stop)
	p.wwg.Wait()
	p.m.PoolCapacity.Sub(float64(p.cfg.Concurrency * p.cfg.QueueSize))
	p.m.NotSelected.Sub(float64(len(p.notSelected))) // a second Pool on the registry shares the gauge
	p.notSelected = nil
	p.reg.unregister()
	return nil
}

// stream returns the stream of the endpoint with this ID (nil: none).
func (p *Pool) stream(id string) *stream {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.streams[id]
}

// subOptions are the transport options of subscription sockets: heartbeats
// on the pool's clock when enabled, else the idle deadline.
func subOptions(cfg PoolConfig, clock telemetry.Clock) zmqx.Options {
	o := zmqx.Options{
		Clock:            clock,
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
	if p.streams[st.id] == st {
		delete(p.streams, st.id)
	}
	st.w.streams--
	st.w.setStreams(st.w.streams)
	p.mu.Unlock()
	if forget {
		p.applier.forget(st.id)
		p.m.forgetEndpoint(st.id)
		p.sm.forget(st.id)
		p.snm.forget(st.id)
		p.rm.forget(st.id)
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
		// A replay kvroute gave up (superseded, cut short, the endpoint
		// removed, the pool closing) is not the publisher's error.
		if e.Op != replay.OpApply && !e.Canceled {
			p.m.ZMQErrors.WithLabelValues(id, e.Op).Inc()
		}
		if next != nil {
			next(e)
		}
	}
	c, err := replay.NewClient(cc, replay.Options{Set: telemetry.Set{Logger: p.log, Clock: p.clock}})
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
	// Snapshot is the engine's snapshot socket ("" without snapshots).
	Snapshot string
	// IndexSource is what the endpoint's entries were last rebuilt from:
	// "engine_snapshot", "replay" (the replay window), "recorded" (a
	// checkpoint file or a peer, verified by replay), "live" (the live
	// stream alone), or "" with nothing applied.
	IndexSource string
	Replaying   bool   // a replay is running
	Degraded    bool   // a gap without replay address, or one a replay gave up on: the index may hold stale blocks
	Messages    uint64 // messages applied, live and replayed
	Replay      string // replay address ("" = none)
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

	// PublisherID is the identity of the publisher's current lifetime
	// (vLLM's publisher_id), valid when HasPublisherID.
	PublisherID    [16]byte
	HasPublisherID bool
	// Heartbeats: the publisher sends identities or idle heartbeats, so its
	// silence is checked (PoolConfig.PublisherSilence). Silent: it fell
	// silent, and the endpoint is degraded until it is heard again.
	// LastHeard is when it was last heard (zero: not watched).
	Heartbeats bool
	Silent     bool
	LastHeard  time.Time
}

// Status returns the state of the endpoint with this ID.
func (p *Pool) Status(id string) (EndpointStatus, bool) {
	st := p.stream(id)
	if st == nil {
		return EndpointStatus{}, false
	}
	return st.status(), true
}

// Endpoints returns the IDs of the endpoints with a stream (per-endpoint
// mode: subscribed; bind mode: seen on the bind socket), sorted.
func (p *Pool) Endpoints() []string {
	p.mu.Lock()
	ids := make([]string, 0, len(p.streams))
	for id := range p.streams {
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

// bindAddr returns the address rank 0's bind-mode socket listens on, or ""
// (see BindAddrs).
func (p *Pool) bindAddr() string {
	if a := p.src.addrs(); len(a) > 0 {
		return a[0]
	}
	return ""
}

// BindAddrs returns the addresses the bind-mode sockets listen on, one per
// data-parallel rank (PoolConfig.BindRanks; "tcp://127.0.0.1:41234", useful
// with port 0), "" for a rank not bound yet; nil when the pool is not in
// bind mode.
func (p *Pool) BindAddrs() []string { return p.src.addrs() }
