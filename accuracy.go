package kvroute

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// AccuracyConfig configures the closed loop that compares, per request, the
// cached tokens the index predicted on the chosen endpoint with the cached
// tokens the engine reports having reused (vLLM's
// usage.prompt_tokens_details.cached_tokens), handed back through
// Decision.Observe or Router.Observe.
type AccuracyConfig struct {
	// Window is how many of an endpoint's latest observed requests decide
	// whether its misses persist. Default 20.
	Window int `json:"window"`
	// MissRatio is the share of the window's requests that must have missed
	// (|predicted − actual| > ToleranceTokens) for the endpoint to be marked
	// inaccurate; it is marked accurate again when the share falls to half
	// of it. Default 0.5.
	MissRatio float64 `json:"missRatio"`
	// ToleranceTokens is the error, in tokens, still counted as a hit. vLLM
	// reuses whole blocks, so a converged index errs by 0; default 0.
	ToleranceTokens int `json:"toleranceTokens"`
	// Resync asks the event pool to replay an endpoint when it becomes
	// inaccurate (see kvevents.Pool.Resync). Default false.
	Resync bool `json:"resync"`
	// ResyncInterval is the least time between two resyncs of one endpoint,
	// a duration string such as "1m". Default 1 minute.
	ResyncInterval time.Duration `json:"resyncInterval"`
}

// Defaults of AccuracyConfig.
const (
	DefaultAccuracyWindow    = 20
	DefaultAccuracyMissRatio = 0.5
	DefaultResyncInterval    = time.Minute
)

func (c AccuracyConfig) withDefaults() AccuracyConfig {
	if c.Window == 0 {
		c.Window = DefaultAccuracyWindow
	}
	if c.MissRatio == 0 {
		c.MissRatio = DefaultAccuracyMissRatio
	}
	if c.ResyncInterval == 0 {
		c.ResyncInterval = DefaultResyncInterval
	}
	return c
}

// Validate reports the first invalid setting.
func (c AccuracyConfig) Validate() error {
	switch {
	case c.Window < 0 || c.Window > 10_000:
		return fmt.Errorf("%w: accuracy.window %d is outside [0, 10000]", ErrInvalidConfig, c.Window)
	case c.MissRatio < 0 || c.MissRatio > 1:
		return fmt.Errorf("%w: accuracy.missRatio %v is outside [0, 1]", ErrInvalidConfig, c.MissRatio)
	case c.ToleranceTokens < 0:
		return fmt.Errorf("%w: accuracy.toleranceTokens %d is negative", ErrInvalidConfig, c.ToleranceTokens)
	case c.ResyncInterval < 0:
		return fmt.Errorf("%w: accuracy.resyncInterval %v is negative", ErrInvalidConfig, c.ResyncInterval)
	}
	return nil
}

// Observation is the outcome of one Observe: the prediction as the engine
// could have honoured it, the engine's answer and their difference.
type Observation struct {
	Endpoint string
	// Predicted is Decision.CachedTokens capped at what the engine can reuse
	// at most: vLLM always computes a prompt's last token, so it reuses at
	// most the whole blocks of PromptTokens−1 tokens.
	Predicted int
	// Actual is the engine's reported cached tokens.
	Actual int
	// Error is Predicted − Actual: positive when the index held blocks the
	// engine no longer had (stale entries), negative when the engine reused
	// blocks the index did not know of (missing entries).
	Error int
}

// errorBuckets are the prediction error buckets, in tokens, symmetric
// around 0 (a converged index errs by exactly 0).
var errorBuckets = []float64{-16384, -4096, -1024, -256, -64, -1, 0, 63, 255, 1023, 4095, 16383}

// accuracy is the router's closed loop: per-endpoint error metrics, the
// persistence windows, and the decisions addressable by request ID.
type accuracy struct {
	cfg    AccuracyConfig
	bs     int
	log    *slog.Logger
	now    func() time.Time
	resync func(endpoint string) error // nil: no resync

	errHist    *prometheus.HistogramVec
	stale      *prometheus.CounterVec
	missing    *prometheus.CounterVec
	observed   *prometheus.CounterVec
	predTokens *prometheus.CounterVec
	actTokens  *prometheus.CounterVec
	inaccurate *prometheus.GaugeVec
	resyncs    *prometheus.CounterVec
	unknown    prometheus.Counter

	mu      sync.Mutex
	eps     map[string]*epWindow
	pending map[string]*Decision // by Request.ID, until Observe or Done
	maxPend int
}

// epWindow is one endpoint's latest outcomes, a ring of Window misses.
type epWindow struct {
	ring       []bool
	next, n    int
	misses     int
	inaccurate bool
	lastResync time.Time
}

func newAccuracy(cfg AccuracyConfig, bs, maxPending int, reg prometheus.Registerer, log *slog.Logger, now func() time.Time) (*accuracy, error) {
	a := &accuracy{cfg: cfg.withDefaults(), bs: bs, log: log, now: now,
		eps: map[string]*epWindow{}, pending: map[string]*Decision{}, maxPend: maxPending}
	ep := []string{"endpoint"}
	a.errHist = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kvroute_router_prediction_error_tokens",
		Help:    "Predicted minus engine-reported cached prompt tokens per observed request (positive: stale index entries; negative: missing ones).",
		Buckets: errorBuckets,
	}, ep)
	a.stale = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_router_prediction_stale_total",
		Help: "Observed requests for which the index predicted more cached tokens than the engine reused (predicted hit, engine missed).",
	}, ep)
	a.missing = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_router_prediction_missing_total",
		Help: "Observed requests for which the engine reused more cached tokens than the index predicted (engine hit more than predicted).",
	}, ep)
	a.observed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_router_prediction_observed_total",
		Help: "Requests whose engine-reported cached tokens were handed back (Decision.Observe).",
	}, ep)
	a.predTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_router_observed_predicted_tokens_total",
		Help: "Predicted cached tokens (capped at what the engine can reuse) of observed requests.",
	}, ep)
	a.actTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_router_observed_cached_tokens_total",
		Help: "Engine-reported cached tokens of observed requests.",
	}, ep)
	a.inaccurate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kvroute_router_endpoint_inaccurate",
		Help: "1 while an endpoint's predictions miss persistently (more than accuracy.missRatio of its latest accuracy.window observed requests).",
	}, ep)
	a.resyncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_router_accuracy_resyncs_total",
		Help: "Replays of an endpoint's event stream asked for because its predictions missed persistently, by result (requested, failed).",
	}, []string{"endpoint", "result"})
	a.unknown = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvroute_router_prediction_unknown_total",
		Help: "Router.Observe calls for a request ID that was not committed, already observed or done, or not kept (bound of the request table).",
	})
	if reg != nil {
		for _, c := range []prometheus.Collector{a.errHist, a.stale, a.missing, a.observed, a.predTokens,
			a.actTokens, a.inaccurate, a.resyncs, a.unknown} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return a, nil
}

// track makes d addressable by id for Router.Observe; beyond the bound the
// decision is simply not addressable (Router.Observe counts it unknown).
func (a *accuracy) track(id string, d *Decision) {
	a.mu.Lock()
	if len(a.pending) < a.maxPend {
		a.pending[id] = d
	}
	a.mu.Unlock()
}

// forget drops the decision filed under id, if it is d.
func (a *accuracy) forget(id string, d *Decision) {
	a.mu.Lock()
	if a.pending[id] == d {
		delete(a.pending, id)
	}
	a.mu.Unlock()
}

// byID returns and unfiles the decision committed under id.
func (a *accuracy) byID(id string) *Decision {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.pending[id]
	delete(a.pending, id)
	return d
}

// observe compares d's prediction with the engine's actual cached tokens.
func (a *accuracy) observe(d *Decision, actual int) Observation {
	id := d.Endpoint.ID
	pred := d.CachedTokens
	if d.PromptTokens > 0 {
		pred = min(pred, (d.PromptTokens-1)/a.bs*a.bs)
	}
	actual = max(actual, 0)
	o := Observation{Endpoint: id, Predicted: pred, Actual: actual, Error: pred - actual}
	a.errHist.WithLabelValues(id).Observe(float64(o.Error))
	a.observed.WithLabelValues(id).Inc()
	a.predTokens.WithLabelValues(id).Add(float64(pred))
	a.actTokens.WithLabelValues(id).Add(float64(actual))
	miss := o.Error > a.cfg.ToleranceTokens || -o.Error > a.cfg.ToleranceTokens
	switch {
	case o.Error > a.cfg.ToleranceTokens:
		a.stale.WithLabelValues(id).Inc()
	case -o.Error > a.cfg.ToleranceTokens:
		a.missing.WithLabelValues(id).Inc()
	}
	a.window(id, miss, o)
	return o
}

// window records one outcome in id's window and raises or clears the
// endpoint's persistent-miss state.
func (a *accuracy) window(id string, miss bool, o Observation) {
	a.mu.Lock()
	w := a.eps[id]
	if w == nil {
		w = &epWindow{ring: make([]bool, a.cfg.Window)}
		a.eps[id] = w
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
	raise := !w.inaccurate && w.n == len(w.ring) && share > a.cfg.MissRatio
	clear := w.inaccurate && share <= a.cfg.MissRatio/2
	doResync := false
	if raise {
		w.inaccurate = true
		now := a.now()
		if a.resync != nil && (w.lastResync.IsZero() || now.Sub(w.lastResync) >= a.cfg.ResyncInterval) {
			w.lastResync, doResync = now, true
		}
	}
	if clear {
		w.inaccurate = false
	}
	misses, n := w.misses, w.n
	a.mu.Unlock()

	switch {
	case raise:
		a.inaccurate.WithLabelValues(id).Set(1)
		a.log.Warn("kvroute: the index's predictions for this endpoint miss persistently: its KV events may be lost or delayed",
			"endpoint", id, "misses", misses, "window", n, "last_predicted", o.Predicted, "last_actual", o.Actual,
			"resync", doResync)
		if doResync {
			if err := a.resync(id); err != nil {
				a.resyncs.WithLabelValues(id, "failed").Inc()
				a.log.Warn("kvroute: resync of the endpoint's event stream failed", "endpoint", id, "err", err)
			} else {
				a.resyncs.WithLabelValues(id, "requested").Inc()
			}
		}
	case clear:
		a.inaccurate.WithLabelValues(id).Set(0)
		a.log.Info("kvroute: the index's predictions for this endpoint are accurate again", "endpoint", id)
	}
}

// Inaccurate reports whether id's predictions currently miss persistently.
func (a *accuracy) isInaccurate(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.eps[id]
	return w != nil && w.inaccurate
}

// remove drops a removed endpoint's window and series.
func (a *accuracy) remove(id string) {
	a.mu.Lock()
	delete(a.eps, id)
	a.mu.Unlock()
	for _, v := range []interface{ DeleteLabelValues(...string) bool }{a.errHist, a.stale, a.missing,
		a.observed, a.predTokens, a.actTokens, a.inaccurate} {
		v.DeleteLabelValues(id)
	}
	a.resyncs.DeletePartialMatch(prometheus.Labels{"endpoint": id})
}
