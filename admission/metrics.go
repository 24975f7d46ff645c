package admission

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes counted in kvroute_admission_requests_total{priority,outcome}.
const (
	outcomeAdmitted   = "admitted"   // passed at once, nothing saturated
	outcomeQueued     = "queued"     // entered the queue
	outcomeDispatched = "dispatched" // left the queue for the pick
	outcomeExpired    = "expired"    // its queue deadline passed
	outcomeCancelled  = "cancelled"  // its context ended while queued
	outcomeShed       = "shed"       // sheddable: refused at once, or pushed out of a full queue
	outcomeQueueFull  = "queue_full" // not sheddable, refused by a full queue
	outcomeClosed     = "closed"     // refused or dropped by Close
)

var outcomes = [...]string{outcomeAdmitted, outcomeQueued, outcomeDispatched, outcomeExpired,
	outcomeCancelled, outcomeShed, outcomeQueueFull, outcomeClosed}

const (
	oAdmitted = iota
	oQueued
	oDispatched
	oExpired
	oCancelled
	oShed
	oQueueFull
	oClosed
)

// The outcome label values of llm-d's queue-duration histogram, for a
// request that was queued.
var llmdOutcomes = [...]string{"Dispatched", "EvictedTTL", "EvictedContextCancelled", "EvictedOther"}

const (
	lDispatched = iota
	lTTL
	lCancelled
	lOther
)

// metrics are a Controller's collectors. The priority label takes only
// configured priorities (and the default), never a value from the wire;
// fairness IDs come from clients and are not a label.
type metrics struct {
	outcomes  *prometheus.CounterVec
	unknown   prometheus.Counter
	queueTime *prometheus.HistogramVec
	size      *prometheus.GaugeVec
	bytes     *prometheus.GaugeVec
}

func newMetrics() metrics {
	return metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_admission_requests_total",
			Help: "Requests through the admission by priority band and outcome: admitted (at once), queued, dispatched (from the queue), expired, cancelled, shed, queue_full, closed.",
		}, []string{"priority", "outcome"}),
		unknown: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_admission_unknown_objectives_total",
			Help: "Requests naming an objective not in the configured table; they get the default priority.",
		}),
		queueTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "llm_d_epp_flow_control_request_queue_duration_seconds",
			Help:    "Time queued requests spent in the admission queue, by priority and outcome (Dispatched, EvictedTTL, EvictedContextCancelled, EvictedOther).",
			Buckets: []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"priority", "outcome"}),
		size: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llm_d_epp_flow_control_queue_size",
			Help: "Requests waiting in the admission queue, by priority band.",
		}, []string{"priority"}),
		bytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "llm_d_epp_flow_control_queue_bytes",
			Help: "Estimated prompt bytes waiting in the admission queue, by priority band.",
		}, []string{"priority"}),
	}
}

func (m metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.outcomes, m.unknown, m.queueTime, m.size, m.bytes}
}

// bandMetrics are one band's series, resolved once so the request path
// never builds label values.
type bandMetrics struct {
	count     [len(outcomes)]prometheus.Counter
	gate      [len(gateOutcomes)]prometheus.Counter // the dispatch gate's (gate.go)
	queueTime [len(llmdOutcomes)]prometheus.Observer
	size      prometheus.Gauge
	bytes     prometheus.Gauge
}

func (m metrics) forBand(priority int) bandMetrics {
	p := strconv.Itoa(priority)
	var b bandMetrics
	for i, o := range outcomes {
		b.count[i] = m.outcomes.WithLabelValues(p, o)
	}
	for i, o := range llmdOutcomes {
		b.queueTime[i] = m.queueTime.WithLabelValues(p, o)
	}
	b.size = m.size.WithLabelValues(p)
	b.bytes = m.bytes.WithLabelValues(p)
	return b
}
