package render

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

// Metric names, shared with the llm-d router so that dashboards and alerts
// carry over.
const (
	// MetricDuration is the render latency histogram, one observation per
	// render call (retry included), labelled by result.
	MetricDuration = "llm_d_epp_token_producer_render_duration_seconds"
	// MetricFailures counts failed render calls by reason, caller
	// cancellation excluded.
	MetricFailures = "llm_d_epp_token_producer_render_failures_total"
)

// Result label values of MetricDuration.
const (
	resultSuccess  = "success"
	resultTimeout  = "timeout"
	resultCanceled = "canceled"
	resultError    = "error"
)

// durationBuckets are the reference buckets: 5 ms to 60 s.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60}

var failureReasons = []Reason{ReasonTimeout, ReasonStatus, ReasonConnection, ReasonDecode, ReasonNoEndpoints, ReasonOther}

// metrics holds the label children resolved once, so that the hot path does
// no label lookups.
type metrics struct {
	success, timeout, canceled, error prometheus.Observer
	failures                          map[Reason]prometheus.Counter

	// owned are the collectors this Client registered itself (not the
	// ones it reused from another Client), which Close unregisters.
	owned []prometheus.Collector
}

// newMetrics registers the Client's collectors through set, reusing those
// another Client already registered on the same registry; all or none: on
// an error it unregisters what it registered.
func newMetrics(set telemetry.Set) (*metrics, error) {
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    MetricDuration,
		Help:    "Duration of render (tokenize) calls to vLLM render endpoints, retry included, by result.",
		Buckets: durationBuckets,
	}, []string{"result"})
	fail := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricFailures,
		Help: "Failed render calls by reason (timeout, status, connection, decode, no_endpoints, other); caller cancellations are not counted.",
	}, []string{"reason"})
	var owned []prometheus.Collector
	dur, err := registerOrReuse(set, dur, &owned)
	if err == nil {
		fail, err = registerOrReuse(set, fail, &owned)
	}
	if err != nil {
		set.Unregister(owned...)
		return nil, err
	}
	m := &metrics{
		owned:    owned,
		success:  dur.WithLabelValues(resultSuccess),
		timeout:  dur.WithLabelValues(resultTimeout),
		canceled: dur.WithLabelValues(resultCanceled),
		error:    dur.WithLabelValues(resultError),
		failures: make(map[Reason]prometheus.Counter, len(failureReasons)),
	}
	for _, r := range failureReasons {
		m.failures[r] = fail.WithLabelValues(string(r))
	}
	return m, nil
}

// registerOrReuse registers c and appends it to owned, or returns the
// collector already registered under the same name (not appended: it stays
// its registrant's), so that several Clients can share one registry.
func registerOrReuse[C prometheus.Collector](set telemetry.Set, c C, owned *[]prometheus.Collector) (C, error) {
	err := set.Register(c)
	if err == nil {
		*owned = append(*owned, c)
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

// observe records one finished render call.
func (m *metrics) observe(seconds float64, err *Error) {
	if err == nil {
		m.success.Observe(seconds)
		return
	}
	switch err.Reason {
	case ReasonCanceled:
		m.canceled.Observe(seconds)
		return
	case ReasonTimeout:
		m.timeout.Observe(seconds)
	default:
		m.error.Observe(seconds)
	}
	if c, ok := m.failures[err.Reason]; ok {
		c.Inc()
	}
}
