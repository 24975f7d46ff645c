package k8s

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/internal/recent"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/telemetry"
)

// Defaults of Config.
const (
	DefaultDebounce             = 250 * time.Millisecond
	DefaultEventsPortAnnotation = "kvroute.io/kv-events-port"
	DefaultReplayPortAnnotation = "kvroute.io/kv-replay-port"
	DefaultMaxEndpoints         = 10_000
)

// Config says which pods are endpoints. Set Pool to follow an InferencePool,
// or Selector and TargetPorts for a plain set of pods (a render pool, or a
// fleet without the Inference Extension).
type Config struct {
	// Namespace is where the pool and its pods live. Required.
	Namespace string `json:"namespace"`
	// Pool is the name of the InferencePool to follow.
	Pool string `json:"pool"`
	// PoolVersion is "v1" (default, inference.networking.k8s.io) or
	// "v1alpha2" (inference.networking.x-k8s.io).
	PoolVersion string `json:"poolVersion"`
	// Selector is a Kubernetes label selector ("app=vllm,tier in (a,b)"),
	// used when Pool is empty.
	Selector string `json:"selector"`
	// TargetPorts are the pods' inference ports, used when Pool is empty;
	// the index of a port is its data-parallel rank.
	TargetPorts []int32 `json:"targetPorts"`
	// EventsPortAnnotation and ReplayPortAnnotation name the pod annotations
	// that give the engine's KV-event PUB and replay ROUTER ports (rank 0;
	// rank r adds r). Empty means the defaults; a pod without them gets the
	// router's configured ports.
	EventsPortAnnotation string `json:"eventsPortAnnotation"`
	ReplayPortAnnotation string `json:"replayPortAnnotation"`
	// ModelsAnnotation names the pod annotation listing the models the
	// pod's engine serves, comma-separated (kvroute.Endpoint.Models; an
	// annotation because label values cannot hold the "/" of most model
	// names). Empty means models.DefaultLabel; a pod without it serves the
	// router's model (or what the gateway's models block finds).
	ModelsAnnotation string `json:"modelsAnnotation"`
	// Debounce is how long changes are gathered before the endpoint set is
	// recomputed (a duration string). Default 250ms.
	Debounce time.Duration `json:"debounce"`
	// MaxEndpoints bounds the endpoint set. Whole pods are left out, never
	// some of one pod's data-parallel ranks: the pods are taken in the
	// order of their endpoint IDs until the next would pass the bound, and
	// the rest are counted (kvroute_k8s_discovery_endpoints_left_out,
	// kvroute_k8s_discovery_pods_left_out) and logged when what is left out
	// changes. Default 10,000.
	MaxEndpoints int `json:"maxEndpoints"`
	// RoleLabel is the pod label that gives an endpoint's prefill/decode
	// role (kvroute.Endpoint.Role: prefill, decode or both; see package
	// disagg). Empty means disagg.DefaultRoleLabel, llm-d's llm-d.ai/role.
	// A pod without it serves both roles; an unknown value is logged and
	// taken as both. llm-d's other values are read as its role filters
	// read them: prefill-decode and encode-prefill-decode as both,
	// encode-prefill as prefill, and a pod labelled encode (an encode-only
	// worker) is left out. A pod relabelled at run time changes role at
	// the next endpoint set.
	RoleLabel string `json:"roleLabel"`
}

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
// but poolNotServed and syncErr, atomics. The informers' goroutines (started by
// Start, stopped by Close through stop) only poke kick, a one-slot channel
// whose pokes coalesce, set syncErr from their watch error handlers, and
// the pool informer's sets poolNotServed. Start runs a
// goroutine that closes its ctxStop once ctx ends or stop is closed, so
// that the cache sync can be abandoned; it starts the loop goroutine after
// the first recompute, and the loop ends when stop is closed, closing
// loopDone. recompute runs on Start's goroutine once, then only on the
// loop, never on both at once; it calls the Sink without holding mu. mu
// guards current, synced, poolErr, sinkCalls, resend, sinking and closed:
// recompute writes current, poolErr, sinkCalls and resend, and sets sinking
// while it calls the Sink, which it does only when closed is unset; Start
// sets synced, Close sets closed (so stop is closed once), and the
// accessors read them. Close waits for loopDone only when synced, that is
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
	synced    bool
	poolErr   error
	sinkCalls int
	resend    bool // the last Sink call failed: the next recompute calls it whatever the set
	sinking   bool
	closed    bool
}

// New builds a Discovery over the given clients (dyn may be nil when Pool is
// empty).
func New(cfg Config, kube kubernetes.Interface, dyn dynamic.Interface, sink Sink, opts Options) (*Discovery, error) {
	gvr, sel, err := cfg.check()
	if err != nil {
		return nil, err
	}
	if sink == nil {
		return nil, errors.New("k8s: a Sink is required")
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

// podSource is a pod informer of the namespace that lists and watches the
// pods of one label selector only, so that its cache holds the followed
// pods rather than every pod of the namespace.
type podSource struct {
	sel     string // the selector it lists with, labels.Selector.String()
	factory informers.SharedInformerFactory
	inf     cache.SharedIndexInformer
	synced  cache.InformerSynced // its handler has seen the initial list
	stop    chan struct{}
}

// newPodSource makes (without starting it) the pod informer of sel, its
// events poking the recompute.
func (d *Discovery) newPodSource(sel labels.Selector) (*podSource, error) {
	s := sel.String()
	f := informers.NewSharedInformerFactoryWithOptions(d.kube, 0, informers.WithNamespace(d.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = s }))
	inf := f.Core().V1().Pods().Informer()
	reg, err := inf.AddEventHandler(d.handler())
	if err != nil {
		return nil, err
	}
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		d.noteSyncError("pods", err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return nil, err
	}
	return &podSource{sel: s, factory: f, inf: inf, synced: reg.HasSynced, stop: make(chan struct{})}, nil
}

// shutdown stops the informer and waits for its goroutines.
func (s *podSource) shutdown() {
	close(s.stop)
	s.factory.Shutdown()
}

// podsFor returns the pod informer of sel and whether it has synced,
// replacing (and stopping) the one of another selector: the pool's
// selector changed, and its pods are listed anew with the new one. It
// returns nil after Close.
func (d *Discovery) podsFor(sel labels.Selector) (*podSource, bool) {
	d.podsMu.Lock()
	defer d.podsMu.Unlock()
	if d.podsDown {
		return nil, false
	}
	if s := sel.String(); d.pods == nil || d.pods.sel != s {
		src, err := d.newPodSource(sel)
		if err != nil {
			d.log.Warn("k8s: cannot follow the pods of the pool's selector", "selector", s, "err", err)
			return nil, false
		}
		if old := d.pods; old != nil {
			d.log.Info("k8s: the InferencePool's selector changed; listing its pods", "from", old.sel, "to", s)
			old.shutdown()
		}
		d.pods = src
		src.factory.Start(src.stop)
	}
	return d.pods, d.pods.synced()
}

func (d *Discovery) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.poke() },
		UpdateFunc: func(any, any) { d.poke() },
		DeleteFunc: func(any) { d.poke() },
	}
}

// poke schedules a recomputation; any number of pokes before it runs
// coalesce into one.
func (d *Discovery) poke() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Start runs the informers, waits (within ctx) until their caches have
// synced, feeds the first endpoint set to the Sink and keeps following
// changes until Close. When the API server does not serve the followed
// InferencePool's resource (its CRD is not installed), Start does not
// wait for that cache: the first set is empty, PoolError says which CRD
// is missing, and the informer keeps retrying with its backoff until the
// CRD is installed, when the pool is followed. A Close that runs before Start follows changes (from
// another goroutine, or from the Sink given the first set) makes Start
// return an error rather than start following on a closed Discovery.
func (d *Discovery) Start(ctx context.Context) error {
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

// Synced reports whether the informers have synced and the first endpoint
// set was computed: a readiness signal for the host.
func (d *Discovery) Synced() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.synced
}

// Endpoints returns the current endpoint set (a copy): the set the Sink
// last accepted (returned nil for).
func (d *Discovery) Endpoints() []kvroute.Endpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.current)
}

// SinkCalls returns how many calls of the Sink succeeded (returned nil),
// for tests and metrics of churn.
func (d *Discovery) SinkCalls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sinkCalls
}

// SyncError returns, while Start waits for the informers' caches, the last
// error a list or watch of the pods or of the pool's resource reported —
// why the caches have not synced: a ServiceAccount without list or watch
// on them ("forbidden"), an API server that does not answer — so that a
// host's readiness can say it instead of only "not synced". Nil once
// synced, and before any error. A missing InferencePool CRD is not one of
// them: Start does not wait for it, and PoolError names it.
func (d *Discovery) SyncError() error {
	if d.Synced() {
		return nil
	}
	if s := d.syncErr.Load(); s != nil {
		return errors.New(*s)
	}
	return nil
}

// noteSyncError records err, reported by a list or watch of what, for
// SyncError.
func (d *Discovery) noteSyncError(what string, err error) {
	// Cut as the status pages cut a client's text (recent.Clip): it is an
	// API server's answer, shown on the readiness endpoint.
	s, _ := recent.Clip("k8s: listing or watching " + what + ": " + err.Error())
	d.syncErr.Store(&s)
}

// PoolError returns why the followed InferencePool is unusable (missing,
// being deleted, its CRD not installed, empty selector, no port), nil when
// it is fine.
func (d *Discovery) PoolError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.poolErr
}

// recompute derives the endpoint set from the caches and hands it to the
// Sink when it changed.
func (d *Discovery) recompute() {
	sel, ports, poolErr := d.target()
	var store cache.Store
	if poolErr == nil {
		src, synced := d.podsFor(sel)
		if !synced {
			// The pool's selector changed and its pods are being listed
			// (or Close ran): the set stays as it is until they have
			// been, looked at again after the debounce.
			if src != nil {
				d.poke()
			}
			return
		}
		store = src.inf.GetStore()
	}
	var pods [][]kvroute.Endpoint // each Ready pod's endpoints, sorted by ID
	var problems [numProblems]int
	if poolErr == nil {
		var ready []*corev1.Pod
		for _, obj := range store.List() {
			if pod, ok := obj.(*corev1.Pod); ok && sel.Matches(labels.Set(pod.Labels)) && podReady(pod) {
				ready = append(ready, pod)
			}
		}
		// Oldest first: of pods that would give the same endpoint ID
		// (hostNetwork pods on one node serving one port, of which only
		// one can hold it), the first created keeps it.
		slices.SortFunc(ready, podAge)
		taken := make(map[string]string) // endpoint ID → the pod that has it
		for _, pod := range ready {
			var probs podProblems
			if pe := podEndpoints(pod, ports, d.cfg, d.warn, &probs); len(pe) > 0 {
				if other, dup := firstTaken(pe, taken); dup != "" {
					probs[problemDuplicateAddress] = true
					d.warn.warn(pod, "endpoint ID", dup, "k8s: leaving out a Ready pod whose endpoint ID another pod already has",
						"endpoint", dup, "other", other, "hostNetwork", pod.Spec.HostNetwork)
				} else {
					for _, ep := range pe {
						taken[ep.ID] = pod.Namespace + "/" + pod.Name
					}
					slices.SortFunc(pe, byID)
					pods = append(pods, pe)
				}
			}
			for i, p := range probs {
				if p {
					problems[i]++
				}
			}
		}
	}
	d.warn.done()
	eps, cut := boundPods(pods, d.cfg.MaxEndpoints)
	if cut != d.cut {
		if cut.pods > 0 {
			d.log.Warn("k8s: endpoint set over its bound; whole pods left out", "max", d.cfg.MaxEndpoints,
				"endpoints", len(eps), "podsLeftOut", cut.pods, "endpointsLeftOut", cut.endpoints, "firstLeftOut", cut.first)
		} else if d.cut.pods > 0 {
			d.log.Info("k8s: endpoint set within its bound again; no pod left out", "max", d.cfg.MaxEndpoints, "endpoints", len(eps))
		}
		d.cut = cut
	}
	for i, n := range problems {
		d.met.problems[i].Set(float64(n))
	}
	d.met.endpoints.Set(float64(len(eps)))
	d.met.leftOut.Set(float64(cut.endpoints))
	d.met.podsLeftOut.Set(float64(cut.pods))
	d.met.poolUnusable.Set(0)
	if poolErr != nil {
		d.met.poolUnusable.Set(1)
	}
	d.mu.Lock()
	if poolErr != nil && (d.poolErr == nil || d.poolErr.Error() != poolErr.Error()) {
		d.log.Warn("k8s: InferencePool unusable; no endpoints", "err", poolErr)
	}
	d.poolErr = poolErr
	// Once Close has run the Sink is not called: closed is read under the
	// lock Close sets it under, and sinking, set in the same critical
	// section, tells Close a call is under way.
	// After a failed call the Sink may hold any set (see Sink), so the set
	// is sent even when it equals the one last accepted.
	if d.closed || (slices.EqualFunc(eps, d.current, endpointEqual) && d.sinkCalls > 0 && !d.resend) {
		d.mu.Unlock()
		return
	}
	d.sinking = true
	d.mu.Unlock()
	err := d.sink(slices.Clone(eps))
	d.mu.Lock()
	d.sinking = false
	d.resend = err != nil
	if err == nil {
		d.current = eps
		d.sinkCalls++
	}
	d.mu.Unlock()
	if err != nil {
		d.met.sinkErrors.Inc()
		d.log.Warn("k8s: the endpoint sink failed; the set is sent again at the next change", "err", err)
	}
}

// podAge orders pods by creation, then namespace and name.
func podAge(a, b *corev1.Pod) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Or(cmpString(a.Namespace, b.Namespace), cmpString(a.Name, b.Name))
}

// firstTaken returns the first of eps' IDs another pod already has, and
// that pod ("" when none is taken).
func firstTaken(eps []kvroute.Endpoint, taken map[string]string) (pod, id string) {
	for _, ep := range eps {
		if p, ok := taken[ep.ID]; ok {
			return p, ep.ID
		}
	}
	return "", ""
}

// target returns the selector and ports in force: the pool's, or the
// configured ones.
func (d *Discovery) target() (labels.Selector, []int32, error) {
	if d.poolInf == nil {
		return d.selector, d.cfg.TargetPorts, nil
	}
	if !d.poolSynced() {
		// Start stopped waiting for the informer because the API server
		// did not serve the pool's resource.
		if d.poolNotServed.Load() {
			return nil, nil, fmt.Errorf("k8s: InferencePool CRD %s not installed", d.gvr.GroupVersion())
		}
		// It serves it now, and the informer is listing: look again after
		// the debounce until it has.
		d.poke()
		return nil, nil, fmt.Errorf("k8s: InferencePool CRD %s installed; InferencePools not listed yet", d.gvr.GroupVersion())
	}
	obj, ok, err := d.poolInf.GetStore().GetByKey(d.cfg.Namespace + "/" + d.cfg.Pool)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, fmt.Errorf("k8s: InferencePool %s/%s not found", d.cfg.Namespace, d.cfg.Pool)
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, fmt.Errorf("k8s: InferencePool %s/%s: unexpected object %T", d.cfg.Namespace, d.cfg.Pool, obj)
	}
	// A pool being deleted (finalizers pending) is gone, as for the
	// Inference Extension's picker, which clears its datastore for it.
	if u.GetDeletionTimestamp() != nil {
		return nil, nil, fmt.Errorf("k8s: InferencePool %s/%s is being deleted", d.cfg.Namespace, d.cfg.Pool)
	}
	p, err := DecodeInferencePool(u)
	if err != nil {
		return nil, nil, err
	}
	return labels.SelectorFromSet(p.Selector), p.TargetPorts, nil
}

// leftOut is what boundPods cut: how many pods, their endpoints, and the
// first pod's first endpoint ID.
type leftOut struct {
	pods, endpoints int
	first           string
}

// boundPods returns the endpoints of pods, each pod's sorted by ID, as one
// set sorted by ID within bound endpoints, and what it left out. It cuts
// whole pods, never some of one pod's data-parallel ranks: the pods are
// taken in the order of their endpoint IDs until the next would pass bound,
// and that pod and the ones after it are left out. (hostNetwork pods on
// one node share an IP: their endpoints, on different ports, may
// interleave, so the set is sorted once assembled.)
func boundPods(pods [][]kvroute.Endpoint, bound int) ([]kvroute.Endpoint, leftOut) {
	slices.SortFunc(pods, func(a, b []kvroute.Endpoint) int { return byID(a[0], b[0]) })
	var eps []kvroute.Endpoint
	var cut leftOut
	for _, pe := range pods {
		if cut.pods == 0 && len(eps)+len(pe) <= bound {
			eps = append(eps, pe...)
			continue
		}
		if cut.pods == 0 {
			cut.first = pe[0].ID
		}
		cut.pods++
		cut.endpoints += len(pe)
	}
	slices.SortFunc(eps, byID)
	return eps, cut
}

func byID(a, b kvroute.Endpoint) int { return cmpString(a.ID, b.ID) }

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
