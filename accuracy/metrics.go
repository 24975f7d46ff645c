package accuracy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

// errorBuckets are the prediction error buckets, in tokens, symmetric
// around 0 (a converged index errs by exactly 0).
var errorBuckets = []float64{-16384, -4096, -1024, -256, -64, -1, 0, 63, 255, 1023, 4095, 16383}

// metrics are the loop's per-endpoint series.
type metrics struct {
	errHist    *prometheus.HistogramVec
	stale      *prometheus.CounterVec
	missing    *prometheus.CounterVec
	observed   *prometheus.CounterVec
	predTokens *prometheus.CounterVec
	actTokens  *prometheus.CounterVec
	inaccurate *prometheus.GaugeVec
	resyncs    *prometheus.CounterVec
	late       prometheus.Counter
	invalid    prometheus.Counter
}

// collectors returns every collector of m, the ones New registers and Close
// unregisters.
func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.errHist, m.stale, m.missing, m.observed, m.predTokens,
		m.actTokens, m.inaccurate, m.resyncs, m.late, m.invalid}
}

// newMetrics builds the loop's metrics and registers them through set, all
// or none.
func newMetrics(set telemetry.Set) (*metrics, error) {
	ep := []string{"endpoint"}
	m := &metrics{
		errHist: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kvroute_router_prediction_error_tokens",
			Help:    "Predicted minus engine-reported cached prompt tokens per observed request (positive: stale index entries; negative: missing ones).",
			Buckets: errorBuckets,
		}, ep),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_router_prediction_stale_total",
			Help: "Observed requests for which the index predicted more cached tokens than the engine reused (predicted hit, engine missed).",
		}, ep),
		missing: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_router_prediction_missing_total",
			Help: "Observed requests for which the engine reused more cached tokens than the index predicted (engine hit more than predicted).",
		}, ep),
		observed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_router_prediction_observed_total",
			Help: "Requests whose engine-reported cached tokens were handed back (Decision.Done with the cached tokens).",
		}, ep),
		predTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_router_observed_predicted_tokens_total",
			Help: "Predicted cached tokens (capped at what the engine can reuse) of observed requests.",
		}, ep),
		actTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_router_observed_cached_tokens_total",
			Help: "Engine-reported cached tokens of observed requests.",
		}, ep),
		inaccurate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kvroute_router_endpoint_inaccurate",
			Help: "1 while an endpoint's predictions miss persistently (more than accuracy.missRatio of its latest accuracy.window observed requests).",
		}, ep),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_router_accuracy_resyncs_total",
			Help: "Replays of an endpoint's event stream asked for because its predictions missed persistently, by result (requested, failed).",
		}, []string{"endpoint", "result"}),
		late: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_router_prediction_late_total",
			Help: "Requests with the engine's cached tokens that ended after their endpoint left the router's endpoint set: not observed, so that the endpoint leaves no series behind.",
		}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_router_prediction_invalid_total",
			Help: "Requests whose engine-reported cached tokens were no count of the prompt's tokens (negative, or more than the prompt holds): not observed.",
		}),
	}
	if err := set.Register(m.collectors()...); err != nil {
		return nil, err
	}
	return m, nil
}

// remove deletes an endpoint's series.
func (m *metrics) remove(id string) {
	for _, v := range []interface{ DeleteLabelValues(...string) bool }{m.errHist, m.stale, m.missing,
		m.observed, m.predTokens, m.actTokens, m.inaccurate} {
		v.DeleteLabelValues(id)
	}
	m.resyncs.DeletePartialMatch(prometheus.Labels{"endpoint": id})
}
