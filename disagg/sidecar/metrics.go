package sidecar

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

// Outcomes of a request through a sidecar: the outcome label values of
// kvroute_sidecar_requests_total.
const (
	// OutcomeSplit: prefilled remotely, decoded here with the transfer.
	OutcomeSplit = "split"
	// OutcomeFallback: a prefiller was named but the prefill ran locally.
	OutcomeFallback = "fallback"
	// OutcomePlain: no prefiller named; proxied as is.
	OutcomePlain = "plain"
)

// metrics are the sidecar's Prometheus metrics.
type metrics struct {
	set            telemetry.Set // where they are registered; unregister undoes it
	requests       *prometheus.CounterVec
	fallbacks      *prometheus.CounterVec
	prefillSeconds prometheus.Histogram
}

func newMetrics(set telemetry.Set) (*metrics, error) {
	m := &metrics{
		set: set,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_sidecar_requests_total",
			Help: "Requests through the P/D sidecar by outcome: split (remote prefill), fallback (local prefill after a failed prefill step), plain (no prefiller named).",
		}, []string{"outcome"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_sidecar_prefill_fallbacks_total",
			Help: "Prefill steps given up for a local prefill on the decoder, by reason (bad_target, unreachable, timeout, status, bad_response, not_allowed, forced_tool: a Messages request forcing a named tool, whose one-token prefill vLLM fails, not sent; body_budget: the budget of body bytes in flight had room for the body, not for the copies a split makes of it; body_too_large: a body over maxBodyBytes, which the gateway's exchange mode took under a larger limit of its own).",
		}, []string{"reason"}),
		prefillSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kvroute_sidecar_prefill_duration_seconds",
			Help:    "Duration of the prefill step (request to the prefiller until its answer), successful or not.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
	}
	for _, o := range []string{OutcomeSplit, OutcomeFallback, OutcomePlain} {
		m.requests.WithLabelValues(o)
	}
	for _, r := range Reasons {
		m.fallbacks.WithLabelValues(r)
	}
	if err := set.Register(m.requests, m.fallbacks, m.prefillSeconds); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return nil, errors.New("sidecar: metrics already registered on this registerer (one Exchange per registry)")
		}
		return nil, err
	}
	return m, nil
}

// unregister unregisters what newMetrics registered, so that an Exchange
// can be built again on the same registry once this one is closed.
func (m *metrics) unregister() { m.set.Unregister(m.requests, m.fallbacks, m.prefillSeconds) }
