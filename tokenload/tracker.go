package tokenload

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/puzpuzpuz/xsync/v3"

	"github.com/kvroute/kvroute/telemetry"
)

// counters is one endpoint's committed load. A Tracker replaces the instance
// when an endpoint is removed and re-added; handles keep the one they were
// dispatched against.
type counters struct {
	tokens   atomic.Int64
	requests atomic.Int64
	peer     peerCounters // other router replicas' load (peer.go)
	t        *Tracker     // for its load observer (observer.go)
	_        [24]byte     // one cache line per endpoint: no false sharing between endpoints
}

// subClamped subtracts n (> 0) from a, never going below zero.
func subClamped(a *atomic.Int64, n int64) {
	for {
		old := a.Load()
		v := max(old-n, 0)
		if a.CompareAndSwap(old, v) {
			return
		}
	}
}

// Tracker holds the in-flight load of every endpoint it has dispatched to.
// It is safe for concurrent use; its zero value is not usable (use
// NewTracker).
type Tracker struct {
	endpoints *xsync.MapOf[string, *counters]
	log       *slog.Logger
	observer  atomic.Pointer[LoadObserver] // nil: no one observes (observer.go)
	gen       atomic.Uint64                // bumped when an endpoint's counters are created or removed (loadview.go)

	set       telemetry.Set        // whose Registerer Close unregisters the collector from
	cs        prometheus.Collector // what NewTracker registered (nil: nothing)
	closeOnce sync.Once
}

// NewTracker returns an empty Tracker with its injected dependencies (a
// Tracker has no configuration: the queue threshold belongs to Score).
// opts.Registerer receives the gauges llm_d_epp_inflight_tokens and
// llm_d_epp_inflight_requests (label endpoint_name); registering two trackers
// in one registry is an error (Close unregisters them). opts.Logger receives
// endpoint removals at debug level; nothing is logged per request.
// opts.Clock is not used.
func NewTracker(opts Options) (*Tracker, error) {
	logger := opts.Log()
	t := &Tracker{endpoints: xsync.NewMapOf[string, *counters](), log: logger, set: opts.Set}
	if opts.Registerer != nil {
		c := newCollector(t)
		if err := opts.Set.Register(c); err != nil {
			return nil, err
		}
		t.cs = c
	}
	return t, nil
}

// Close unregisters the gauges NewTracker registered, so a Tracker can be
// built again on the same registry. The Tracker keeps counting; its load is
// then just not exported. Close is idempotent.
func (t *Tracker) Close() {
	t.closeOnce.Do(func() {
		if t.cs != nil {
			t.set.Unregister(t.cs)
		}
	})
}

// counters returns the endpoint's current counter instance, creating it on
// first use (the only allocation of the dispatch path).
func (t *Tracker) counters(endpoint string) *counters {
	if c, ok := t.endpoints.Load(endpoint); ok {
		return c
	}
	c, loaded := t.endpoints.LoadOrStore(endpoint, &counters{t: t})
	if !loaded {
		t.gen.Add(1) // before any load is added to c: a LoadView resolved without c re-resolves
	}
	return c
}

// Dispatch records a request sent to endpoint that will prefill
// uncachedTokens prompt tokens there (negative counts as 0) and returns its
// accounting handle. The gateway calls FirstChunk when the first response
// chunk arrives and Done when the request ends (success, error or abort).
// It allocates the handle; DispatchInto does not.
func (t *Tracker) Dispatch(endpoint string, uncachedTokens int64) *Inflight {
	h := new(Inflight)
	t.DispatchInto(h, endpoint, uncachedTokens)
	return h
}

// DispatchInto is Dispatch into a caller-owned handle, typically a field of
// the caller's per-request decision, so the request path allocates nothing.
// If h still holds load from an earlier dispatch, that load is released first.
// DispatchInto must not run concurrently with other methods on the same h.
func (t *Tracker) DispatchInto(h *Inflight, endpoint string, uncachedTokens int64) {
	t.dispatch(h, t.counters(endpoint), endpoint, uncachedTokens)
}

// dispatch is DispatchInto with the endpoint's current counters c.
func (t *Tracker) dispatch(h *Inflight, c *counters, endpoint string, uncachedTokens int64) {
	h.Done()
	n := max(uncachedTokens, 0)
	h.c, h.endpoint = c, endpoint
	h.tokens.Store(n)
	h.open.Store(true)
	c.requests.Add(1)
	if n > 0 {
		c.tokens.Add(n)
	}
	t.observe(endpoint, n, 1)
}

// Load returns the endpoint's committed in-flight tokens and open requests:
// this process's own plus, when router replicas share their load
// (SetPeerLoads), the other replicas' last published totals. ok is false
// when the tracker has no counters for it (never dispatched to, or removed
// since); as far as this process knows its load is then zero. Load does not
// allocate.
func (t *Tracker) Load(endpoint string) (tokens, requests int64, ok bool) {
	c, ok := t.endpoints.Load(endpoint)
	if !ok {
		return 0, 0, false
	}
	return withPeer(c.tokens.Load(), c.peer.tokens.Load()), withPeer(c.requests.Load(), c.peer.requests.Load()), true
}

// Remove drops the endpoint's counters (it left the pool) and reports
// whether it had any. Handles dispatched before keep decrementing the dropped
// instance; a later Dispatch to the same ID starts from zero.
func (t *Tracker) Remove(endpoint string) bool {
	c, ok := t.endpoints.LoadAndDelete(endpoint)
	if ok {
		t.gen.Add(1)
		t.log.Debug("tokenload: endpoint removed", "endpoint", endpoint,
			"inflightTokens", c.tokens.Load(), "inflightRequests", c.requests.Load())
	}
	return ok
}

// Range calls fn for every endpoint with counters, in no particular order,
// until fn returns false, with this process's own load (never the peers':
// this is what a replica publishes to the others). For debug dumps and for pruning endpoints that left
// the pool (call Remove from fn, which is allowed).
func (t *Tracker) Range(fn func(endpoint string, tokens, requests int64) bool) {
	t.endpoints.Range(func(ep string, c *counters) bool {
		return fn(ep, c.tokens.Load(), c.requests.Load())
	})
}

// Len returns the number of endpoints with counters.
func (t *Tracker) Len() int { return t.endpoints.Size() }

// Inflight is the accounting entry of one dispatched request (per request and
// endpoint, so a disaggregated prefill/decode request holds one per role).
// Its methods are safe for concurrent use and each release happens exactly
// once. The zero value and a nil *Inflight hold nothing, and their methods
// are no-ops that report zero values. An Inflight
// must not be copied after its first dispatch.
type Inflight struct {
	c        *counters
	endpoint string
	tokens   atomic.Int64 // tokens still held; swapped to 0 on release
	open     atomic.Bool  // request still counted
}

// Endpoint returns the endpoint the request was dispatched to ("" for a
// nil or zero Inflight).
func (h *Inflight) Endpoint() string {
	if h == nil {
		return ""
	}
	return h.endpoint
}

// Held returns the tokens this request still holds and whether it still
// counts as an open request (0 and false for a nil or zero Inflight).
func (h *Inflight) Held() (tokens int64, open bool) {
	if h == nil {
		return 0, false
	}
	return h.tokens.Load(), h.open.Load()
}

// FirstChunk releases the request's tokens: its prefill is done. Only the
// first release (of FirstChunk or Done) takes effect; the request stays
// counted until Done.
func (h *Inflight) FirstChunk() {
	if h == nil || h.c == nil {
		return
	}
	if h.tokens.Load() == 0 {
		return // nothing held: no swap (a locked instruction) needed
	}
	if n := h.tokens.Swap(0); n > 0 {
		subClamped(&h.c.tokens, n)
		h.c.t.observe(h.endpoint, -n, 0)
	}
}

// Done releases the request and any tokens FirstChunk did not release. Call it
// once the request ends for any reason: completion, error or abort. Later
// calls do nothing.
func (h *Inflight) Done() {
	if h == nil || h.c == nil {
		return
	}
	// Each field is read before it is swapped: what is already released
	// costs no locked instruction (the swap still decides who releases).
	var n, req int64
	if h.tokens.Load() != 0 {
		if n = h.tokens.Swap(0); n > 0 {
			subClamped(&h.c.tokens, n)
		}
	}
	if h.open.Load() && h.open.Swap(false) {
		subClamped(&h.c.requests, 1)
		req = 1
	}
	if n > 0 || req > 0 {
		h.c.t.observe(h.endpoint, -max(n, 0), -req)
	}
}
