package admission

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// Options are a Controller's injected dependencies; the zero value is valid.
type Options struct {
	// Set is the observability bundle: Registerer receives the metrics
	// (see the package doc; nil registers none), Logger the configuration
	// at construction (nil discards), Clock times queue deadlines, the
	// re-check and claims (nil is the wall clock).
	telemetry.Set
	// Detectors are the engines' saturation signals (an
	// enginemetrics.Scraper, for one), consulted in order after kvroute's
	// own accounting; see Controller. A nil entry is refused by New.
	Detectors []Detector
	// Load is the load tracker of kvroute's own accounting; nil until
	// SetLoad (a Router's tracker exists only after the Router).
	Load *tokenload.Tracker
	// Signals are the engines' scraped states the dispatch gate (Hold)
	// reads (an enginemetrics.Scraper); nil judges every endpoint by
	// kvroute's own accounting.
	Signals EngineSignals
}

// objective is a resolved Config.Objectives entry.
type objective struct {
	band    *band
	timeout time.Duration
}

// Controller is the admission stage: a kvroute.Admission that admits a
// request at once when a candidate endpoint is free and otherwise queues it
// by priority band, flow and deadline (see the package doc). It is safe for
// concurrent use; Close ends it.
//
// Ownership: the Controller starts no goroutine of its own. mu guards
// claims, busy, wanted, union, scanned, aged, bytes, seq, timer, armed,
// gates and gatesPruneAt, the bands' queues and the gates' state. The
// goroutines that take it: Admit's slow path and Hold, on their callers'
// goroutines (each then waits for its outcome on its own channel, without
// mu), Notify, Close, and depths, which the cluster replica's refresh
// goroutine and the fleet gauge's Collect call. The re-check (recheck)
// runs on the clock's AfterFunc timer goroutine under mu: it is armed when
// a request is queued or held at the gate, and re-arms itself while
// requests wait, claims are held or requests are held; pending counts it while armed or running, so that
// Close, having stopped it or let it run, waits for it. Each claim owns a
// watch of its request's context (context.AfterFunc, registered under mu
// when the claim is taken): when the context ends, the watch runs on a
// goroutine of the context package and gives the claim back under mu,
// unless the claim is gone or another request's; whatever drops a claim
// (Close included) stops its watch, so none outlives its claim. queued, nclaims,
// nheld and closed change under mu and are atomics so that the fast paths
// read them without it. The fields above them are set by New and not written after.
type Controller struct {
	cfg        Config
	set        telemetry.Set
	clock      telemetry.Clock
	own        *TokenDetector
	engines    []Detector
	objectives map[string]objective
	def        objective
	bands      []*band // highest priority first
	met        metrics
	fleet      *fleetGauge // the fleet's queue depth (fleet.go)
	shareMu    sync.Mutex  // serializes ShareQueues and stopSharing; never taken under mu
	stopShare  func()      // detaches the replica ShareQueues was given; nil: none
	signals    EngineSignals
	gateMet    *prometheus.CounterVec

	queued  atomic.Int64 // requests queued: Admit's fast path reads it
	nclaims atomic.Int64 // claims held: the fast path defers to them
	nheld   atomic.Int64 // requests waiting at the dispatch gate (gate.go)
	closed  atomic.Bool  // Close ran: Admit's fast path reads it

	mu      sync.Mutex
	claims  map[string]claim
	busy    map[string]struct{} // endpoints found busy in the current dispatch pass
	wanted  int                 // distinct endpoints the queue named at the pass's start
	union   map[string]struct{} // wantedLocked's scratch
	scanned uint64              // candidates dispatch passes looked at (the tests read it)
	aged    uint64              // queued requests makeRoomLocked looked at (the tests read it)
	bytes   int64
	seq     uint64
	timer   telemetry.Timer // the re-check; armed while the queue is not empty
	armed   bool
	pending sync.WaitGroup           // re-check calls armed or running
	gates   map[string]*gateEndpoint // the dispatch gate, by endpoint ID (gate.go)
	// gatesPruneAt is the size of gates from which Hold prunes it (gate.go).
	gatesPruneAt int
}

// New validates cfg and opts and builds a Controller. Pass it as
// kvroute.Options.Admission and, once the Router exists, give it the
// Router's load tracker with SetLoad.
func New(cfg Config, opts Options) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for i, d := range opts.Detectors {
		if d == nil { // it would panic on the first saturation check
			return nil, fmt.Errorf("admission: Options.Detectors[%d] is nil", i)
		}
	}
	cfg = cfg.withDefaults()
	c := &Controller{
		cfg:        cfg,
		set:        opts.Set,
		clock:      opts.Clk(),
		own:        NewTokenDetector(cfg.Saturation, opts.Load),
		engines:    slices.Clone(opts.Detectors),
		objectives: make(map[string]objective, len(cfg.Objectives)),
		met:        newMetrics(),
		claims:     make(map[string]claim),
		busy:       make(map[string]struct{}),
		union:      make(map[string]struct{}),
		signals:    opts.Signals,
		gateMet:    newGateMetric(),
		gates:      make(map[string]*gateEndpoint),

		gatesPruneAt: gatePruneMin,
	}
	bands := map[int]*band{}
	bandOf := func(p int) *band {
		if b := bands[p]; b != nil {
			return b
		}
		m := c.met.forBand(p)
		for i, o := range gateOutcomes {
			m.gate[i] = c.gateMet.WithLabelValues(strconv.Itoa(p), o)
		}
		b := newBand(p, m)
		bands[p] = b
		c.bands = append(c.bands, b)
		return b
	}
	c.def = objective{band: bandOf(cfg.DefaultPriority), timeout: cfg.QueueTimeout}
	for _, o := range cfg.Objectives {
		t := o.QueueTimeout
		if t == 0 {
			t = cfg.QueueTimeout
		}
		c.objectives[o.Name] = objective{band: bandOf(o.Priority), timeout: t}
	}
	slices.SortFunc(c.bands, func(a, b *band) int { return cmp.Compare(b.priority, a.priority) }) // a difference would overflow
	c.fleet = newFleetGauge(c)
	if err := opts.Register(c.collectors()...); err != nil {
		return nil, fmt.Errorf("admission: metrics: %w", err)
	}
	opts.Log().Debug("admission configured", "objectives", len(cfg.Objectives),
		"defaultPriority", cfg.DefaultPriority, "fairness", cfg.Fairness, "ordering", cfg.Ordering,
		"maxQueuedRequests", cfg.MaxQueuedRequests, "maxQueuedBytes", cfg.MaxQueuedBytes,
		"tokenThreshold", c.own.MaxTokens(), "maxOpenRequests", cfg.Saturation.MaxOpenRequests,
		"engineDetectors", len(c.engines))
	return c, nil
}

// collectors are the Controller's metrics.
func (c *Controller) collectors() []prometheus.Collector {
	return append(c.met.collectors(), c.fleet, c.gateMet)
}

// Config returns the configuration with its defaults filled in.
func (c *Controller) Config() Config { return c.cfg }

// SetLoad gives the own accounting its load tracker (a Router's Load()).
func (c *Controller) SetLoad(load *tokenload.Tracker) { c.own.SetLoad(load) }

// Queued returns the number of requests waiting.
func (c *Controller) Queued() int { return int(c.queued.Load()) }

// saturated reports whether ep is saturated: by kvroute's own accounting,
// or by an engine detector with a fresh signal. An engine signal can add
// saturation, never hide what the own accounting sees; an endpoint without
// a fresh engine signal is judged by the own accounting alone.
func (c *Controller) saturated(ep kvroute.Endpoint) bool {
	if s, _ := c.own.Saturation(ep); s {
		return true
	}
	for _, d := range c.engines {
		if s, known := d.Saturation(ep); known && s {
			return true
		}
	}
	return false
}

// objectiveOf resolves the request's objective; with count, an unknown
// name is counted. Admit counts; Hold, which sees the same request again
// after its pick, does not, so that a request is counted once.
func (c *Controller) objectiveOf(ctx context.Context, count bool) objective {
	name := objectiveOf(ctx)
	if name == "" {
		return c.def
	}
	if o, ok := c.objectives[name]; ok {
		return o
	}
	if count {
		c.met.unknown.Inc()
	}
	return c.def
}

// Admit implements kvroute.Admission. With an empty queue, no claims and a
// candidate that is not saturated it returns nil at once, without
// allocating; after Close it returns ErrClosed. Otherwise a sheddable request is refused with ErrShed when every
// candidate is saturated, and any other request waits in the queue until it is
// dispatched (nil), its queue deadline passes (ErrExpired), ctx ends (ctx's
// error), a full queue pushes it out (ErrShed, sheddable only) or the
// Controller closes (ErrClosed).
func (c *Controller) Admit(ctx context.Context, req *kvroute.Request, endpoints []kvroute.Endpoint) error {
	o := c.objectiveOf(ctx, true)
	rec := recordOf(ctx)
	if rec != nil {
		if earlier := rec.arrive(c.clock.Now()); earlier != nil {
			c.unclaim(earlier) // picked again: the earlier pick is over
		}
	}
	if c.queued.Load() == 0 && c.nclaims.Load() == 0 && !c.closed.Load() {
		for _, ep := range endpoints {
			if !c.saturated(ep) {
				o.band.m.count[oAdmitted].Inc()
				return nil
			}
		}
	}
	return c.admitSlow(ctx, req, endpoints, o, rec)
}

// Notify tells the admission that endpoint's accounting moved (a pick
// committed to it, its first chunk came, a request on it is done): its claim
// lapses and the queue is served again at once. endpoint "" just serves the
// queue. Hosts call it on every release; without it the queue notices
// releases at the next re-check (Config.Recheck). Cheap when nothing waits.
func (c *Controller) Notify(endpoint string) {
	if c.queued.Load() == 0 && c.nclaims.Load() == 0 && c.nheld.Load() == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if endpoint != "" {
		c.dropClaimLocked(endpoint)
	}
	c.dispatchLocked()
}

// Close refuses every queued and later request with ErrClosed, stops the
// re-check and unregisters the metrics.
func (c *Controller) Close() {
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return
	}
	c.closed.Store(true)
	if c.armed && c.timer.Stop() {
		c.armed = false
		c.pending.Done()
	}
	for _, b := range c.bands {
		for len(b.ring) > 0 {
			w := b.ring[0].items.w[0]
			c.finishLocked(w, oClosed, lOther, ErrClosed)
		}
	}
	c.closeGatesLocked()
	for ep := range c.claims {
		c.dropClaimLocked(ep) // and stop their watches of the requests' contexts
	}
	c.mu.Unlock()
	c.pending.Wait()
	c.stopSharing()
	c.set.Unregister(c.collectors()...)
}
