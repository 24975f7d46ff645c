package k8s

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/telemetry"
)

// Sink receives every new endpoint set, sorted by ID. Router.SetEndpoints
// (or a picker's) fits.
//
// A nil error says the Sink holds exactly the set it was given: discovery
// calls it again only with a set that differs. An error says nothing about
// what the Sink holds: it may have applied the set in whole
// (Router.SetEndpoints commits the set and then reports the event
// subscriptions it could not ensure), in part, or not at all. The error is
// logged and counted, and the next recompute (at the next informer event,
// after the debounce) calls the Sink with the set it computes even when
// that set equals the one the Sink last accepted, and so on until a call
// succeeds.
type Sink func([]kvroute.Endpoint) error

// Options are a Discovery's dependencies.
type Options struct {
	// Set is the observability bundle (registerer, logger, tracer
	// provider, clock; see package telemetry):
	//   Registerer receives discovery's metrics (kvroute_k8s_discovery_*;
	//   nil registers none); two Discoveries on one registry need
	//   constant labels apart (Set.With).
	//   Logger receives discovery's logs; nil discards them.
	//   Clock times the Debounce; nil is the wall clock.
	telemetry.Set
}

// Discovery watches pods (and an InferencePool) and feeds the endpoint set
// to a Sink. Start it once; Close stops its informers and its loop.
//
// Ownership: everything above mu is set by New and not written after,
// but poolNotServed, poolListErr and syncErr, atomics. The informers' goroutines (started by
// Start, stopped by Close through stop) only poke kick, a one-slot channel
// whose pokes coalesce, set syncErr from their watch error handlers, and
// the pool informer's sets poolNotServed and poolListErr. Start runs a
// goroutine that closes its ctxStop once ctx ends or stop is closed, so
// that the cache sync can be abandoned; it starts the loop goroutine after
// the first recompute, and the loop ends when stop is closed, closing
// loopDone. recompute runs on Start's goroutine once, then only on the
// loop, never on both at once; it calls the Sink without holding mu. mu
// guards current, started, synced, poolErr, sinkCalls, resend, sinking and
// closed: recompute writes current, poolErr, sinkCalls and resend, and sets
// sinking while it calls the Sink, which it does only when closed is
// unset; Start sets started (so that it runs once) and synced, Close sets
// closed (so stop is closed once), and the accessors read them. Close waits for loopDone only when synced, that is
// once the loop was started, and no Sink call is under way (the Sink may be
// the one calling Close); the first Close closes closeDone when it has
// finished, and a later one waits for it unless a Sink call is under way.
type Discovery struct {
	cfg      Config
	selector labels.Selector // when following a plain selector
	gvr      schema.GroupVersionResource
	sink     Sink
	log      *slog.Logger
	clock    telemetry.Clock // of the debounce
	met      *metrics        // written by recompute only
	warn     *podWarnings    // used by recompute only
	cut      leftOut         // what the last recompute left out over MaxEndpoints; recompute's only

	kube kubernetes.Interface
	// podsMu guards pods and podsDown. pods is the pod informer of the
	// selector in force (nil in pool mode until the pool's selector is
	// known); recompute replaces it when the pool's selector changes.
	// podsDown is set by Close: no informer is started after it.
	podsMu     sync.Mutex
	pods       *podSource
	podsDown   bool
	dyn        dynamicinformer.DynamicSharedInformerFactory
	poolInf    cache.SharedIndexInformer
	handled    []cache.InformerSynced // each handler has seen its informer's initial list
	poolSynced cache.InformerSynced   // the pool's handler has seen its informer's initial list
	// poolNotServed is whether the pool informer's last list or watch was
	// answered NotFound: the API server does not serve the pool's resource
	// (its CRD is not installed). Written by the informer's goroutine
	// (poolClient), read by Start and recompute.
	poolNotServed atomic.Bool
	// poolListErr is the error (its text, cut to 256 bytes) of the pool
	// informer's last list or watch when it failed otherwise than
	// NotFound (an API server that does not answer, a refusal), which
	// says nothing of whether the resource is served; nil after an
	// answer. Written and read as poolNotServed is.
	poolListErr atomic.Pointer[string]
	// syncErr is the last error an informer's list or watch reported
	// (its text, cut to 256 bytes): why the caches have not synced, when
	// they have not. Written by the informers' goroutines (their watch
	// error handlers), read by SyncError.
	syncErr   atomic.Pointer[string]
	kick      chan struct{}
	stop      chan struct{}
	loopDone  chan struct{}
	closeDone chan struct{} // closed when the first Close has finished

	mu        sync.Mutex
	current   []kvroute.Endpoint
	started   bool // Start has run: a second is refused
	synced    bool
	poolErr   error
	sinkCalls int
	resend    bool // the last Sink call failed: the next recompute calls it whatever the set
	sinking   bool
	closed    bool
}

// missingClientset is whether kube is nil, or a nil *kubernetes.Clientset
// in the interface, which would pass a nil check and panic on the pod
// informer's goroutine at its first list.
func missingClientset(kube kubernetes.Interface) bool {
	switch k := kube.(type) {
	case nil:
		return true
	case *kubernetes.Clientset:
		return k == nil
	}
	return false
}

// New builds a Discovery over the given clients: kube is required, dyn
// only when following a Pool (it may be nil when Pool is empty).
func New(cfg Config, kube kubernetes.Interface, dyn dynamic.Interface, sink Sink, opts Options) (*Discovery, error) {
	gvr, sel, err := cfg.check()
	if err != nil {
		return nil, err
	}
	if sink == nil {
		return nil, errors.New("k8s: a Sink is required")
	}
	if missingClientset(kube) {
		return nil, errors.New("k8s: a Kubernetes clientset is required: the pods are listed and watched with it")
	}
	d := &Discovery{cfg: cfg, sink: sink, log: opts.Logger, clock: opts.Clk(), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), loopDone: make(chan struct{}), closeDone: make(chan struct{})}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.warn = newPodWarnings(d.log)
	if d.cfg.Debounce == 0 {
		d.cfg.Debounce = DefaultDebounce
	}
	if d.cfg.MaxEndpoints == 0 {
		d.cfg.MaxEndpoints = DefaultMaxEndpoints
	}
	if d.cfg.RoleLabel == "" {
		d.cfg.RoleLabel = disagg.DefaultRoleLabel
	}
	if d.cfg.EventsPortAnnotation == "" {
		d.cfg.EventsPortAnnotation = DefaultEventsPortAnnotation
	}
	if d.cfg.ReplayPortAnnotation == "" {
		d.cfg.ReplayPortAnnotation = DefaultReplayPortAnnotation
	}
	if d.cfg.ModelsAnnotation == "" {
		d.cfg.ModelsAnnotation = models.DefaultLabel
	}
	if cfg.Pool != "" && dyn == nil {
		return nil, errors.New("k8s: following an InferencePool needs a dynamic client")
	}
	d.gvr, d.selector, d.kube = gvr, sel, kube
	if d.gvr.Resource == "" {
		// A plain selector: its pods' informer is known now. A pool's is
		// made once the pool's selector is read (podsFor).
		if d.pods, err = d.newPodSource(sel); err != nil {
			return nil, err
		}
		d.handled = append(d.handled, d.pods.synced)
	}
	if d.gvr.Resource != "" {
		d.dyn = dynamicinformer.NewFilteredDynamicSharedInformerFactory(poolClient{dyn, d}, 0, cfg.Namespace, nil)
		d.poolInf = d.dyn.ForResource(d.gvr).Informer()
		reg, err := d.poolInf.AddEventHandler(d.handler())
		if err != nil {
			return nil, err
		}
		d.poolSynced = reg.HasSynced
		// Start waits for the pool's informer only while the API server
		// serves its resource: without the CRD it would wait forever.
		d.handled = append(d.handled, func() bool { return reg.HasSynced() || d.poolNotServed.Load() })
		// A missing CRD is reported once, as the pool's error; the
		// reflector's own error at each of its retries would repeat it.
		if err := d.poolInf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			if !apierrors.IsNotFound(err) {
				d.noteSyncError(d.gvr.Resource, err)
				cache.DefaultWatchErrorHandler(ctx, r, err)
			}
		}); err != nil {
			return nil, err
		}
	}
	if d.met, err = newMetrics(opts.Set); err != nil {
		return nil, fmt.Errorf("k8s: registering discovery metrics: %w", err)
	}
	return d, nil
}

// Start runs the informers, waits (within ctx) until their caches have
// synced, feeds the first endpoint set to the Sink and keeps following
// changes until Close. When the API server does not serve the followed
// InferencePool's resource (its CRD is not installed), Start does not
// wait for that cache: the first set is empty, PoolError says which CRD
// is missing, and the informer keeps retrying with its backoff until the
// CRD is installed, when the pool is followed. A Close that runs before Start follows changes (from
// another goroutine, or from the Sink given the first set) makes Start
// return an error rather than start following on a closed Discovery. A
// second Start returns an error and changes nothing.
func (d *Discovery) Start(ctx context.Context) error {
	d.mu.Lock()
	again := d.started
	d.started = true
	d.mu.Unlock()
	if again {
		return errStartedAlready
	}
	d.podsMu.Lock()
	if d.pods != nil && !d.podsDown {
		d.pods.factory.Start(d.pods.stop)
	}
	d.podsMu.Unlock()
	if d.dyn != nil {
		d.dyn.Start(d.stop)
	}
	// A handler registration has synced once its informer has and every
	// poke from the initial list has been delivered; the first recompute
	// below covers those, so they are drained rather than left to arm a
	// debounce that would race with the first real change.
	syncs := d.handled
	ctxStop := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-d.stop:
		}
		close(ctxStop)
	}()
	ok := cache.WaitForCacheSync(ctxStop, syncs...)
	if ok && d.poolInf != nil {
		// The pool's pods, listed with its selector, once it is known.
		if sel, _, err := d.target(); err == nil {
			src, _ := d.podsFor(sel)
			ok = src != nil && cache.WaitForCacheSync(ctxStop, src.synced)
		}
	}
	if !ok {
		d.Close()
		if ctx.Err() == nil {
			return errClosedInStart // the caches stopped because Close ran
		}
		return fmt.Errorf("k8s: informer caches did not sync: %w", context.Cause(ctx))
	}
	select {
	case <-d.kick:
	default:
	}
	d.recompute()
	// A Close that ran since (the Sink may call it) saw synced false and
	// will not wait for the loop: it must not start.
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return errClosedInStart
	}
	d.synced = true
	d.mu.Unlock()
	go d.loop()
	return nil
}

// errStartedAlready is the error of a second Start: one Discovery runs
// one loop, which Close waits for once.
var errStartedAlready = errors.New("k8s: the discovery was started already; Start runs once")

// errClosedInStart is Start's error when Close ran before Start began
// following changes: the Discovery stays closed and follows nothing.
var errClosedInStart = errors.New("k8s: the discovery was closed while it was starting")

// loop recomputes the endpoint set Debounce (on the Options' clock) after
// the first change of each burst, until Close: once per burst, the changes
// that came during the debounce included.
func (d *Discovery) loop() {
	defer close(d.loopDone)
	for {
		select {
		case <-d.stop:
			return
		case <-d.kick:
			t := d.clock.NewTimer(d.cfg.Debounce)
			select {
			case <-d.stop:
				t.Stop()
				return
			case <-t.C():
			}
			// Events of this burst poked kick again while the debounce ran.
			// The informers update their stores before they run the
			// handlers, so the recompute below reads every change those
			// pokes announced: drained, they arm no second debounce.
			select {
			case <-d.kick:
			default:
			}
			d.recompute()
		}
	}
}

// Close stops the informers and the loop and unregisters the metrics; the
// last endpoint set stays with the Sink. Once Close returns the Sink is not
// called again, and a Close that runs while another is shutting down
// returns when that one has finished, so that whichever returns first the
// metrics can be registered anew. A Sink call already under way when Close
// runs is not waited for, since it may be the Sink itself calling Close: it
// finishes after Close returns, and the loop's goroutine ends with it; for
// the same reason a Close during a Sink call does not wait for another.
func (d *Discovery) Close() {
	d.mu.Lock()
	if d.closed {
		// A Close while a Sink call is under way may come from the Sink:
		// like the first Close, it then waits for nothing.
		inSink := d.sinking
		d.mu.Unlock()
		if !inSink {
			<-d.closeDone
		}
		return
	}
	d.closed = true
	// The loop is waited for only when it runs and is not in the Sink: a
	// Sink that calls Close would otherwise wait for itself.
	waitLoop := d.synced && !d.sinking
	d.mu.Unlock()
	close(d.stop)
	d.podsMu.Lock()
	d.podsDown = true
	pods := d.pods
	d.podsMu.Unlock()
	if pods != nil {
		pods.shutdown()
	}
	if d.dyn != nil {
		d.dyn.Shutdown()
	}
	if waitLoop {
		<-d.loopDone
	}
	d.met.unregister()
	close(d.closeDone)
}
