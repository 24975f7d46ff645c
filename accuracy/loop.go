package accuracy

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/telemetry"
)

// Options are the Loop's injected dependencies; the zero value is valid.
type Options struct {
	// Set is the observability bundle (registerer, logger, tracer
	// provider, clock; see package telemetry):
	//   Registerer receives the loop's metrics; nil registers nothing.
	//   Logger receives the persistent-miss warnings and the recoveries; nil
	//   discards them.
	//   Clock is the clock of ResyncInterval; nil is the wall clock.
	telemetry.Set
	// Resync, when set and Config.Resync is on, is asked to replay an
	// endpoint's KV events when its predictions start missing persistently
	// (a kvroute Router passes its event pool's Resync).
	Resync func(endpoint string) error
}

// Prediction is what the router predicted for one request on its chosen
// endpoint, handed to the loop when the request ends.
type Prediction struct {
	// Endpoint is the chosen endpoint's ID.
	Endpoint string
	// PromptTokens is the request's number of prompt tokens (> 0).
	PromptTokens int
	// CachedTokens is the number of prompt tokens the index predicted the
	// endpoint holds; negative counts as 0.
	CachedTokens int
}

// Observation is the outcome of one observed request: the prediction as the
// engine could have honoured it, the engine's answer and their difference.
type Observation struct {
	// Endpoint is the endpoint the request went to.
	Endpoint string
	// Predicted is Prediction.CachedTokens capped at what the engine can
	// reuse at most: vLLM always computes a prompt's last token, so it
	// reuses at most the whole blocks of PromptTokens−1 tokens.
	Predicted int
	// Actual is the engine's reported cached tokens.
	Actual int
	// Error is Predicted − Actual: positive when the index held blocks the
	// engine no longer had (stale entries), negative when the engine reused
	// blocks the index did not know of (missing entries).
	Error int
}

// Loop is the closed accuracy loop of one router: per endpoint, the
// prediction error metrics and a window of its latest outcomes that decides
// whether its misses persist. It keeps nothing per request but a count of
// the predictions in flight: a request carries its own Prediction and
// hands it back with the engine's answer when it ends. It is safe for
// concurrent use.
type Loop struct {
	cfg    Config
	bs     int
	log    *slog.Logger
	now    func() time.Time
	resync func(endpoint string) error // nil: no resync
	met    *metrics

	set       telemetry.Set // whose Registerer Close unregisters met from
	closeOnce sync.Once

	pending atomic.Int64

	// mu guards eps and live, and orders every change to an endpoint's
	// series with its removal, so that a request ending as its endpoint
	// leaves cannot recreate what the removal deleted.
	mu   sync.Mutex
	eps  map[string]*window
	live map[string]struct{} // the endpoints observed (SetEndpoints); nil: all
}

// window is one endpoint's latest outcomes, a ring of Window misses.
type window struct {
	ring       []bool
	next, n    int
	misses     int
	inaccurate bool
	lastResync time.Time
	// owed: the endpoint became inaccurate within ResyncInterval of its
	// last resync; its resync is asked for once the interval has passed,
	// should it still be inaccurate then.
	owed bool
}

// New returns a Loop for a router whose KV blocks hold blockSize tokens
// (> 0). cfg's zero fields take their defaults; an invalid cfg is an error
// (see Config.Validate), as is a registration failure.
func New(cfg Config, blockSize int, opts Options) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if blockSize <= 0 {
		return nil, errors.New("accuracy: the block size must be positive")
	}
	met, err := newMetrics(opts.Set)
	if err != nil {
		return nil, err
	}
	l := &Loop{cfg: cfg.withDefaults(), bs: blockSize, log: opts.Log(), now: opts.Clk().Now, met: met, set: opts.Set,
		eps: map[string]*window{}}
	if l.cfg.Resync {
		l.resync = opts.Resync
	}
	return l, nil
}

// Begin counts a prediction in flight: a request was routed with a
// prediction and its End is to come. Every Begin is followed by exactly one
// End.
func (l *Loop) Begin() { l.pending.Add(1) }

// End ends one prediction counted by Begin. With the engine's answer
// (reported true, actual its cached prompt tokens) it compares the two,
// exports the error, records the outcome in the endpoint's window and
// returns the Observation; without it (the engine did not say, or the
// request was dropped unfinished) it only ends the prediction and returns ok
// false. An answer that is no count of the prompt's cached tokens (actual
// negative, or above p.PromptTokens when that is known: a faulty or hostile
// engine) is not observed either, only counted
// (kvroute_router_prediction_invalid_total): read as 0 it would count a
// miss the engine never reported, and an absurd count would stay in the
// endpoint's cached-token total for good.
func (l *Loop) End(p Prediction, actual int, reported bool) (o Observation, ok bool) {
	l.pending.Add(-1)
	if !reported {
		return Observation{}, false
	}
	if actual < 0 || (p.PromptTokens > 0 && actual > p.PromptTokens) {
		l.met.invalid.Inc()
		return Observation{}, false
	}
	return l.observe(p, actual)
}

// SetEndpoints replaces the endpoints whose requests are observed: the
// windows and series of endpoints not in ids are dropped, and a request
// that ends after its endpoint left (it was in flight when the endpoint was
// removed) is not observed, only counted
// (kvroute_router_prediction_late_total), so that endpoints that come and go
// (pods replaced in a rollout) leave no window or series behind. Until it
// is first called every endpoint is observed.
func (l *Loop) SetEndpoints(ids []string) {
	live := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		live[id] = struct{}{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.live = live
	for id := range l.eps {
		if _, ok := live[id]; !ok {
			delete(l.eps, id)
			l.met.remove(id)
		}
	}
}

// Pending returns the number of predictions in flight (Begun, not yet
// Ended).
func (l *Loop) Pending() int64 { return l.pending.Load() }

// Close unregisters the metrics New registered, so a Loop can be built again
// on the same registry. The Loop keeps working; its metrics are then just
// not exported. Close is idempotent.
func (l *Loop) Close() {
	l.closeOnce.Do(func() { l.set.Unregister(l.met.collectors()...) })
}

// observe compares p with the engine's actual cached tokens; false when
// p's endpoint is not observed (left out by SetEndpoints, or removed since).
func (l *Loop) observe(p Prediction, actual int) (Observation, bool) {
	id := p.Endpoint
	pred := max(p.CachedTokens, 0) // a counter panics on a negative addition
	if p.PromptTokens > 0 {
		pred = min(pred, (p.PromptTokens-1)/l.bs*l.bs)
	}
	o := Observation{Endpoint: id, Predicted: pred, Actual: actual, Error: pred - actual}
	l.mu.Lock()
	if !l.liveLocked(id) {
		l.mu.Unlock()
		l.met.late.Inc()
		return Observation{}, false
	}
	l.met.errHist.WithLabelValues(id).Observe(float64(o.Error))
	l.met.observed.WithLabelValues(id).Inc()
	l.met.predTokens.WithLabelValues(id).Add(float64(pred))
	l.met.actTokens.WithLabelValues(id).Add(float64(actual))
	miss := o.Error > l.cfg.ToleranceTokens || -o.Error > l.cfg.ToleranceTokens
	switch {
	case o.Error > l.cfg.ToleranceTokens:
		l.met.stale.WithLabelValues(id).Inc()
	case -o.Error > l.cfg.ToleranceTokens:
		l.met.missing.WithLabelValues(id).Inc()
	}
	t := l.recordLocked(id, miss)
	l.mu.Unlock()
	l.report(id, t, o)
	return o, true
}

// liveLocked reports whether id is observed.
func (l *Loop) liveLocked(id string) bool {
	if l.live == nil {
		return true
	}
	_, ok := l.live[id]
	return ok
}

// transition is what one outcome changed in an endpoint's persistent-miss
// state, for report to log (and resync) outside the loop's lock.
type transition struct {
	raise, clear, resync bool
	misses, n            int // the window's misses and outcomes after it
}

// recordLocked adds one outcome to id's window, raises or clears the
// endpoint's persistent-miss state and its gauge, and returns what changed.
// mu must be held.
func (l *Loop) recordLocked(id string, miss bool) transition {
	w := l.eps[id]
	if w == nil {
		w = &window{ring: make([]bool, l.cfg.Window)}
		l.eps[id] = w
	}
	if w.n == len(w.ring) {
		if w.ring[w.next] {
			w.misses--
		}
	} else {
		w.n++
	}
	w.ring[w.next] = miss
	if miss {
		w.misses++
	}
	w.next = (w.next + 1) % len(w.ring)
	share := float64(w.misses) / float64(len(w.ring))
	t := transition{
		raise:  !w.inaccurate && w.n == len(w.ring) && share > l.cfg.MissRatio,
		clear:  w.inaccurate && share <= l.cfg.MissRatio/2,
		misses: w.misses, n: w.n,
	}
	switch {
	case t.raise:
		w.inaccurate = true
		w.owed = l.resync != nil
		l.met.inaccurate.WithLabelValues(id).Set(1)
	case t.clear:
		w.inaccurate, w.owed = false, false
		l.met.inaccurate.WithLabelValues(id).Set(0)
	}
	if w.owed {
		if now := l.now(); w.lastResync.IsZero() || now.Sub(w.lastResync) >= l.cfg.ResyncInterval {
			w.lastResync, w.owed, t.resync = now, false, true
		}
	}
	return t
}

// report logs a raised or cleared persistent-miss state and asks for the
// resync recordLocked decided on; it runs without mu, since the resync
// reaches the event pool.
func (l *Loop) report(id string, t transition, o Observation) {
	switch {
	case t.raise:
		l.log.Warn("kvroute: the index's predictions for this endpoint miss persistently: its KV events may be lost or delayed",
			"endpoint", id, "misses", t.misses, "window", t.n, "last_predicted", o.Predicted, "last_actual", o.Actual,
			"resync", t.resync)
	case t.clear:
		l.log.Info("kvroute: the index's predictions for this endpoint are accurate again", "endpoint", id)
	case t.resync: // owed since the endpoint became inaccurate within ResyncInterval of its last resync
		l.log.Warn("kvroute: the index's predictions for this endpoint still miss persistently: resyncing its event stream now that accuracy.resyncInterval has passed",
			"endpoint", id, "misses", t.misses, "window", t.n)
	}
	if t.resync {
		err := l.resync(id)
		result := "requested"
		if err != nil {
			result = "failed"
			l.log.Warn("kvroute: resync of the endpoint's event stream failed", "endpoint", id, "err", err)
		}
		l.mu.Lock()
		if l.liveLocked(id) { // the endpoint may have left during the resync
			l.met.resyncs.WithLabelValues(id, result).Inc()
		}
		l.mu.Unlock()
	}
}

// Inaccurate reports whether the endpoint's predictions currently miss
// persistently.
func (l *Loop) Inaccurate(endpoint string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.eps[endpoint]
	return w != nil && w.inaccurate
}

// Remove drops a removed endpoint's window and metric series. Once
// SetEndpoints has been called, it also stops observing the endpoint: a
// request to it that ends later is only counted as late. Before that,
// while every endpoint is observed, such a request starts a new window and
// series for it, as for any endpoint; a caller whose endpoints come and go
// uses SetEndpoints (the Router does).
func (l *Loop) Remove(endpoint string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.eps, endpoint)
	if l.live != nil {
		delete(l.live, endpoint)
	}
	l.met.remove(endpoint)
}
