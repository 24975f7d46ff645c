package render

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/h1pool"
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

// attemptFailureReasons label kvroute_render_attempt_failures_total: the
// reasons one HTTP attempt can fail for.
var attemptFailureReasons = []Reason{ReasonTimeout, ReasonStatus, ReasonConnection, ReasonDecode, ReasonOther}

var failureReasons = []Reason{ReasonTimeout, ReasonStatus, ReasonConnection, ReasonDecode, ReasonNoEndpoints, ReasonSaturated, ReasonOther}

// queueWaitBuckets are the buckets of the queue wait histogram: 1 ms to 5 s.
var queueWaitBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// Reasons of kvroute_render_queue_rejections_total: why a render found no
// slot. Each makes its request route by load at once.
const (
	rejectQueueTimeout = iota // waited Config.MaxQueueWait
	rejectNoQueue             // no slot free and Config.MaxQueueWait is 0
	rejectDeadline            // the render's budget or the caller's deadline ended in the queue
	numRejectReasons
)

var rejectReasons = [numRejectReasons]string{"queue_timeout", "no_queue", "deadline"}

// Outcomes of kvroute_render_hedges_total.
const (
	hedgeWon     = iota // the hedge answered first; the first render was canceled
	hedgeLost           // the first render answered first; the hedge was canceled
	hedgeFailed         // neither answered
	hedgeSkipped        // the threshold passed but no less loaded endpoint had a free slot, or the budget was spent
	numHedgeOutcomes
)

var hedgeOutcomes = [numHedgeOutcomes]string{"won", "lost", "failed", "skipped"}

// metrics holds the label children resolved once, so that the hot path does
// no label lookups.
type metrics struct {
	success, timeout, canceled, error prometheus.Observer
	failures                          map[Reason]prometheus.Counter
	attemptFailures                   map[Reason]prometheus.Counter // kvroute_render_attempt_failures_total{reason}
	queueWait                         prometheus.Observer
	rejected                          [numRejectReasons]prometheus.Counter
	hedges                            [numHedgeOutcomes]prometheus.Counter
	loserDrained, loserCanceled       prometheus.Counter   // kvroute_render_hedge_losers_total{end}
	connDialed                        prometheus.Counter   // kvroute_render_connections_dialed_total
	connClosed                        []prometheus.Counter // kvroute_render_connections_closed_total{reason}, by h1pool.CloseReason
	notEnabled                        prometheus.Counter   // kvroute_render_not_enabled_total

	// owned are the collectors this Client registered itself (not the
	// ones it reused from another Client), which Close unregisters.
	owned []prometheus.Collector
}

// newMetrics registers the Client's collectors through set, reusing those
// another Client already registered on the same registry; all or none: on
// an error it unregisters what it registered. c's endpoints are exported by
// a capacity collector (the first Client's, when several share a registry).
func newMetrics(set telemetry.Set, c *Client) (*metrics, error) {
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    MetricDuration,
		Help:    "Duration of render (tokenize) calls to vLLM render endpoints, retry included, by result.",
		Buckets: durationBuckets,
	}, []string{"result"})
	fail := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricFailures,
		Help: "Failed render calls by reason (timeout, status, connection, decode, no_endpoints, saturated, other); caller cancellations are not counted.",
	}, []string{"reason"})
	wait := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    metricQueueWait,
		Help:    "Wait for a render slot (render Config.MaxConcurrency), one observation per render that got one or gave up.",
		Buckets: queueWaitBuckets,
	})
	rej := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricQueueRejected,
		Help: "Renders given up without an attempt because no render slot was free, by reason (queue_timeout, no_queue, deadline); their requests route by load.",
	}, []string{"reason"})
	hedges := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricHedges,
		Help: "Renders that ran past their endpoint's recent p95, by outcome: won (the hedge on another endpoint answered first), lost (the first answered first), failed (neither answered), skipped (no less loaded endpoint with a free slot, or the 5 % hedge budget spent).",
	}, []string{"outcome"})
	losers := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricHedgeLosers,
		Help: "Losing attempts of hedged renders, by how they ended: drained (the request was written whole; its answer was read and discarded in the background, keeping the connection) or canceled (not yet written whole; its connection was closed when part of the request had been sent, else given back to the pool).",
	}, []string{"end"})
	dialed := prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricConnsDialed,
		Help: "Connections the render client dialed to plain-HTTP renderers. At a steady load this stays flat, but for connections that replace closed ones (kvroute_render_connections_closed_total).",
	})
	closed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricConnsClosed,
		Help: "Connections to plain-HTTP renderers the render client closed, by reason: canceled (a render's attempt ended while its request was in flight: a timeout, a canceled hedge loser, the caller gone), broken (a failed exchange or an answer left unread), asked (the renderer closed it or asked to), idle (idle timeout, idle pool full, Close).",
	}, []string{"reason"})
	attempts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricAttemptFails,
		Help: "Failed render attempts by reason (timeout, status, connection, decode, other), those a retry or a hedge made up for included; hedge losers abandoned and caller cancellations are not counted.",
	}, []string{"reason"})
	notEnabled := prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricNotEnabled,
		Help: "Render attempts a renderer answered with FastAPI's bare 404 (its render routes not registered: vLLM without --enable-scale-out); the render was retried on another endpoint, and that endpoint is passed over for that route for 30s.",
	})
	var owned []prometheus.Collector
	dur, err := registerOrReuse(set, dur, &owned)
	if err == nil {
		fail, err = registerOrReuse(set, fail, &owned)
	}
	if err == nil {
		wait, err = registerOrReuse(set, wait, &owned)
	}
	if err == nil {
		rej, err = registerOrReuse(set, rej, &owned)
	}
	if err == nil {
		hedges, err = registerOrReuse(set, hedges, &owned)
	}
	if err == nil {
		losers, err = registerOrReuse(set, losers, &owned)
	}
	if err == nil {
		dialed, err = registerOrReuse(set, dialed, &owned)
	}
	if err == nil {
		closed, err = registerOrReuse(set, closed, &owned)
	}
	if err == nil {
		attempts, err = registerOrReuse(set, attempts, &owned)
	}
	if err == nil {
		notEnabled, err = registerOrReuse(set, notEnabled, &owned)
	}
	if err == nil {
		_, err = registerOrReuse(set, prometheus.Collector(newCapacityCollector(c)), &owned)
	}
	if err != nil {
		set.Unregister(owned...)
		return nil, err
	}
	m := &metrics{
		owned:     owned,
		success:   dur.WithLabelValues(resultSuccess),
		timeout:   dur.WithLabelValues(resultTimeout),
		canceled:  dur.WithLabelValues(resultCanceled),
		error:     dur.WithLabelValues(resultError),
		failures:  make(map[Reason]prometheus.Counter, len(failureReasons)),
		queueWait: wait,

		attemptFailures: make(map[Reason]prometheus.Counter, len(attemptFailureReasons)),
	}
	for _, r := range attemptFailureReasons {
		m.attemptFailures[r] = attempts.WithLabelValues(string(r))
	}
	for i, r := range rejectReasons {
		m.rejected[i] = rej.WithLabelValues(r)
	}
	m.loserDrained, m.loserCanceled = losers.WithLabelValues("drained"), losers.WithLabelValues("canceled")
	m.connDialed = dialed
	m.notEnabled = notEnabled
	for _, r := range h1pool.CloseReasons() {
		m.connClosed = append(m.connClosed, closed.WithLabelValues(r.String()))
	}
	for i, o := range hedgeOutcomes {
		m.hedges[i] = hedges.WithLabelValues(o)
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
