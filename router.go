package kvroute

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kvroute/kvroute/accuracy"
	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/checkpoint"
	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/internal/endpointid"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// Options are the Router's injected dependencies; the zero value is valid.
type Options struct {
	// Set is the router's observability, passed on to its parts:
	//   - Registerer receives every metric of the router and its parts; nil
	//     registers nothing. Close unregisters what New registered.
	//   - Logger receives the router's logs; nil discards them.
	//   - TracerProvider traces every Pick (spans "pick", "keys",
	//     "index_lookup", "filter", "score", and the render client's
	//     "render" per attempt) and, when Config.Events.Tracing enables
	//     them, a sample of the KV-event messages (events_receive,
	//     events_process, events_decode); nil traces nothing and costs
	//     nothing.
	//   - Clock is the clock of the index's speculative entries, the
	//     request-ID table's TTL, the accuracy loop, the event pool's
	//     streams, the interval of the cache-blind warnings and the
	//     checkpoint's (its periodic writes, the peer bootstrap's hedge and
	//     progress watches, the snapshot handler's check of a proof's
	//     time and of a peer's rate); nil is the wall clock.
	telemetry.Set
	// Scorers are added to the token-load score, each clamped to [0, 1] and
	// weighted; a weight that is not a finite number (NaN, ±Inf) is an
	// ErrInvalidConfig from New.
	Scorers []WeightedScorer
	// Filters run, in order, before the affinity filter (see Filter).
	Filters []Filter
	// Admission admits each request before it is routed (see Admission);
	// nil admits every request.
	Admission Admission
	// Profile picks a request in its roles (see Profile); nil picks it in
	// one role among every candidate.
	Profile Profile
	// Random returns uniform values in [0, 1) for the affinity filter's
	// exploration and for the tie-breaks of requests without block keys
	// (other ties are broken by hashing, see Selection.Score); nil uses
	// math/rand/v2. It must be safe for concurrent use.
	Random func() float64
	// EventSelector, when set, decides from an endpoint's labels whether its
	// KV events are subscribed, in place of Config.Events.Selector (setting
	// both is an error): pass a Kubernetes labels.Selector's Matches to get
	// exactly Kubernetes' selector semantics.
	EventSelector func(labels map[string]string) bool
	// IndexSources are further sources of the index's starting state,
	// tried after the configured peers and checkpoint file (see
	// checkpoint.IndexSource).
	IndexSources []checkpoint.IndexSource
	// NewClusterReplica, when set, builds the router's cluster replica from
	// its index and load tracker in place of cluster.New over
	// Config.Cluster (which is then not used): the routing simulation
	// passes one that builds a cluster.NewManual replica over its
	// virtual-time store and keeps the Manual to drive it.
	NewClusterReplica func(index *kvindex.Index, load *tokenload.Tracker) (*cluster.Replica, error)
	// Approximate, when set, is the approximate prefix index of the
	// endpoints whose KV-event stream is not live (see package approx):
	// their cache information then comes from the router's own decisions,
	// and their decisions are labelled approximate. Nil keeps no
	// approximate entries: such endpoints are routed blind. Either way each
	// decision's mode is in Decision.CacheMode and
	// kvroute_router_decision_mode_total. An Index serves one Router.
	Approximate *approx.Index
}

// Router is the default Picker: it routes each request through the
// pipeline of the package documentation (admission → profile → render →
// keys → lookup → filter → score → pick → commit). Pick runs them all;
// Match returns a Selection that runs them one stage at a time.
type Router struct {
	cfg        Config
	log        *slog.Logger
	now        func() time.Time
	index      *kvindex.Index
	render     *render.Client
	filter     *affinity.Filter
	load       *tokenload.Tracker
	requests   *tokenload.RequestTable
	events     *subscriptions   // nil unless Config.Events.Enabled
	cluster    *cluster.Replica // nil unless Config.Cluster is configured (cluster.go)
	pipe       pipeline         // the stages' extension points (picker.go)
	random     func() float64
	met        *routerMetrics
	selections sync.Pool
	decisions  sync.Pool // released Decisions (Decision.Release)
	warn       warnings
	models     *modelCheck
	snap       *checkpoint.Keeper // checkpoint, bootstrap and snapshot serving (checkpoint.go)
	reg        *ownedRegisterer   // what New registered, unregistered by Close; nil without Options.Registerer
	tracer     trace.Tracer       // nil: no tracing
	acc        *accuracy.Loop
	ready      readiness
	approx     *approx.Index // Options.Approximate, or a disabled one keeping the modes (approx.go)

	// loraFingerprints is each adapter of Config.TowerConnectorLoRAPaths'
	// path fingerprint (keys_lora.go), computed once by New; nil for none.
	loraFingerprints map[string]string
	// mmLoRAs is Config.DefaultMMLoRAs' modalities, sorted, read once by
	// New (keys_mmlora.go); nil for none.
	mmLoRAs []string

	// needsEndpoints is set when routing depends on SetEndpoints (KV-event
	// subscriptions, or rendering on the routed endpoints: cleared by
	// SetRenderEndpoints when events are off); endpointsSet once
	// SetEndpoints has been called.
	needsEndpoints atomic.Bool
	endpointsSet   atomic.Bool

	mu         sync.Mutex
	endpoints  map[string]Endpoint
	closed     bool
	renderFrom renderSource // where prompts are rendered (render_pool.go); changes only from endpoints to pool
}

// New builds a Router from cfg: the index, the render client, the affinity
// filter, the load tracker and, when cfg.Events.Enabled, the KV-event
// subscriber pool. Call SetEndpoints to give it endpoints, and Close to stop
// it.
//
// ctx bounds the Router's start only: while the index is restored
// (Config.Bootstrap's peers, the checkpoint file, Options.IndexSources),
// ending ctx abandons the restore and New returns an error wrapping ctx's
// error (context.Canceled or context.DeadlineExceeded) after releasing what
// it built. The Router's life after New returns does not depend on ctx.
func New(ctx context.Context, cfg Config, opts Options) (*Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.validateRouting(); err != nil {
		return nil, err
	}
	for i, ws := range opts.Scorers {
		if math.IsNaN(ws.Weight) || math.IsInf(ws.Weight, 0) {
			// A non-finite weight makes every sum NaN or infinite, and the
			// pick then the first candidate whatever the scores.
			return nil, fmt.Errorf("%w: scorers[%d]: weight %v is not a finite number", ErrInvalidConfig, i, ws.Weight)
		}
	}
	cfg = cfg.withDefaults()
	log := opts.Log()
	r := &Router{cfg: cfg, log: log, now: opts.Clk().Now, random: opts.Random, endpoints: map[string]Endpoint{}}
	r.loraFingerprints = loraFingerprints(cfg.TowerConnectorLoRAPaths)
	r.cfg.TowerConnectorLoRAPaths = nil // read once, here: a caller's later change to its map reaches nothing
	r.mmLoRAs = defaultMMLoRAModalities(cfg.DefaultMMLoRAs)
	r.cfg.DefaultMMLoRAs = nil
	if opts.Registerer != nil {
		r.reg = &ownedRegisterer{reg: opts.Registerer}
		opts.Registerer = r.reg // every part registers through it, so that Close unregisters them all
	}
	if r.random == nil {
		r.random = rand.Float64
	}
	if opts.TracerProvider != nil {
		r.tracer = opts.TracerProvider.Tracer(tracerName)
	}
	ok := false
	defer func() {
		if !ok {
			r.Close()
		}
	}()
	icfg := cfg.Index
	icfg.BlockSize = cfg.BlockSize
	icfg.SpeculativeTTL = cfg.Speculative.TTL
	var err error
	if r.index, err = kvindex.New(icfg, kvindex.Options{Set: telemetry.Set{Registerer: opts.Registerer, Clock: opts.Clock}}); err != nil {
		return nil, fmt.Errorf("kvroute: index: %w", err)
	}
	// Before the event subscriptions exist: they resume from the restored
	// positions.
	if err = r.restoreIndex(ctx, cfg, opts); err != nil {
		return nil, fmt.Errorf("kvroute: snapshot: %w", err)
	}
	r.renderFrom = renderSourceOf(cfg)
	if r.renderFrom != renderOff {
		rcfg := cfg.Render
		rcfg.ModelName = cfg.Model
		if r.render, err = render.New(rcfg, render.Options{Set: telemetry.Set{Registerer: wrap(opts.Registerer, cfg.MetricLabels.Render), Logger: log, TracerProvider: opts.TracerProvider, Clock: opts.Clock}}); err != nil {
			return nil, fmt.Errorf("kvroute: render: %w", err)
		}
	}
	if r.filter, err = affinity.New(cfg.Affinity, affinity.Options{Set: telemetry.Set{Registerer: wrap(opts.Registerer, cfg.MetricLabels.Affinity), Logger: log}, Random: r.random}); err != nil {
		return nil, fmt.Errorf("kvroute: affinity: %w", err)
	}
	r.pipe = newPipeline(cfg, opts, r.filter)
	if r.load, err = tokenload.NewTracker(tokenload.Options{Set: telemetry.Set{Registerer: opts.Registerer, Logger: log}}); err != nil {
		return nil, fmt.Errorf("kvroute: tokenload: %w", err)
	}
	if r.requests, err = tokenload.NewRequestTable(cfg.Requests,
		tokenload.Options{Set: telemetry.Set{Registerer: opts.Registerer, Logger: log, Clock: opts.Clock}}); err != nil {
		return nil, fmt.Errorf("kvroute: requests: %w", err)
	}
	if r.met, err = newRouterMetrics(opts.Registerer, wrap(opts.Registerer, cfg.MetricLabels.Prediction)); err != nil {
		return nil, err
	}
	if r.models, err = newModelCheck(cfg.Model, opts.Registerer, log); err != nil {
		return nil, err
	}
	if *cfg.Events.Enabled {
		if r.events, err = newSubscriptions(cfg, r.index, opts.Registerer, log, r.models.observe, opts.EventSelector, opts.TracerProvider, opts.Clock); err != nil {
			return nil, fmt.Errorf("kvroute: events: %w", err)
		}
	} else {
		log.Warn("kvroute: KV events are disabled (Config.Events.Enabled is false): the index holds only speculative entries and what the embedder stores itself; load-only decisions are counted in kvroute_router_cache_blind_total{reason=\"events_disabled\"}")
	}
	aopts := accuracy.Options{Set: telemetry.Set{Registerer: opts.Registerer, Logger: log, Clock: opts.Clock}}
	if r.events != nil {
		aopts.Resync = r.events.eventPool().Resync // used with cfg.Accuracy.Resync
	}
	if r.acc, err = accuracy.New(cfg.Accuracy, cfg.BlockSize, aopts); err != nil {
		return nil, err
	}
	r.ready = readiness{giveUp: cfg.Readiness.GiveUpAfter}
	if r.events != nil && opts.Registerer != nil {
		if err := opts.Registerer.Register(kvevents.NewStateCollector(r.events.eventPool(), r.now)); err != nil {
			return nil, fmt.Errorf("kvroute: events: %w", err)
		}
	}
	if err = r.startApprox(opts); err != nil {
		return nil, fmt.Errorf("kvroute: approximate: %w", err)
	}
	r.needsEndpoints.Store(*cfg.Events.Enabled || r.renderFrom == renderFromEndpoints)
	if err = r.startCluster(cfg, opts); err != nil {
		return nil, err
	}
	r.selections.New = func() any { return new(Selection) }
	r.snap.Start()
	ok = true
	return r, nil
}

// Index returns the router's KV-block index, for inspection and for
// embedders that feed it events themselves.
func (r *Router) Index() *kvindex.Index { return r.index }

// Events returns the router's KV-event subscriber pool, for its status and
// statistics; nil when Config.Events.Enabled is false.
func (r *Router) Events() *kvevents.Pool {
	if r.events == nil {
		return nil
	}
	return r.events.eventPool()
}

// Load returns the router's in-flight load tracker.
func (r *Router) Load() *tokenload.Tracker { return r.load }

// Requests returns the router's request-ID table, for its size. It holds
// the Decisions committed with a Request.ID (see Router.Decision).
func (r *Router) Requests() *tokenload.RequestTable { return r.requests }

// SetEndpoints replaces the set of known endpoints (an empty ID, one over
// 259 bytes or one not UTF-8 is an error and leaves the set as it was): it feeds the KV-event
// subscriptions (new endpoints are subscribed, removed ones unsubscribed and
// cleared from the index), the render client's endpoints (when no fixed
// render URL is configured) and drops the load counters (and their gauge
// series) of removed endpoints, and of any other endpoint outside the set
// with no request in flight.
// The accuracy loop then observes only requests that end on an endpoint of
// the set: one ending after its endpoint was removed recreates none of that
// endpoint's series.
func (r *Router) SetEndpoints(eps []Endpoint) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("kvroute: router closed")
	}
	next := make(map[string]Endpoint, len(eps))
	for i, e := range eps {
		// The ID labels the per-endpoint metrics series: bounded before
		// anything takes it, and a refused set changes nothing.
		if err := endpointid.Check(e.ID); err != nil {
			return fmt.Errorf("%w: endpoints[%d]: %w", ErrInvalidConfig, i, err)
		}
		next[e.ID] = e
	}
	var errs []error
	r.models.setKnown(next) // before subscribing: the first topic of a new endpoint must be checked
	if r.snap != nil {
		r.snap.DropUnlisted(func(id string) bool { _, ok := next[id]; return ok })
	}
	if r.events != nil {
		if err := r.events.setEndpoints(eps); err != nil {
			errs = append(errs, err)
		}
	}
	if r.renderFrom == renderFromEndpoints {
		reps := make([]render.Endpoint, 0, len(eps))
		for _, e := range eps {
			reps = append(reps, render.Endpoint{ID: e.ID, URL: e.URL(), Models: e.Models})
		}
		if err := r.render.SetEndpoints(reps); err != nil {
			errs = append(errs, err)
		}
	}
	ids := endpointIDs(next)    // read, not kept, by each of these
	r.approx.SetEndpoints(ids)  // modes of the new set; entries of removed endpoints dropped
	r.cluster.SetEndpoints(ids) // nil-safe; before the removals below, so no peer load recreates a removed endpoint
	r.acc.SetEndpoints(ids)     // a request ending on a removed endpoint recreates none of its series
	for id := range r.endpoints {
		if _, ok := next[id]; !ok {
			r.load.Remove(id)
			r.models.remove(id)
		}
	}
	// Counters of endpoints outside the set that a request recreated since
	// (Served moving one to a fallback that had left) go once they are
	// idle: one with requests in flight is pruned by a later call.
	r.load.Range(func(id string, tokens, requests int64) bool {
		if _, ok := next[id]; !ok && tokens == 0 && requests == 0 {
			r.load.Remove(id)
		}
		return true
	})
	r.endpoints = next
	r.endpointsSet.Store(true)
	return errors.Join(errs...)
}

// Close stops the event subscriptions and the index's background sweep,
// releases the render client's connections, and unregisters from
// Options.Registerer every collector the Router and its parts registered,
// so that a new Router can register on the same registry. Decisions made
// earlier stay valid; Pick after Close still works from the index as it
// was.
func (r *Router) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	r.cluster.Close() // nil-safe; first, so the peers stop counting this replica's load
	if r.events != nil {
		r.events.close()
	}
	if r.snap != nil {
		r.snap.Close() // after the events: the last checkpoint holds every applied batch
	}
	if r.render != nil {
		r.render.Close()
	}
	if r.index != nil {
		r.index.Close()
	}
	if r.requests != nil {
		r.requests.Close() // stops its expiry timer; requests still filed stay as they are
	}
	if r.filter != nil {
		r.filter.Close() // its decision counter leaves the table the filters of a registry share
	}
	if r.reg != nil {
		r.reg.unregisterAll() // last: the parts are stopped and register nothing more
	}
}

// validateRouting rejects the configurations that leave a Router unable to
// use cache information at all: New calls it after Validate.
func (c Config) validateRouting() error {
	if c.Model == "" {
		return fmt.Errorf("%w: model is required: it roots the block keys of every request and names the events' model (start from DefaultConfig and set Model)", ErrInvalidConfig)
	}
	return nil
}
