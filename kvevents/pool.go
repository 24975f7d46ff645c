package kvevents

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/kvindex"
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
