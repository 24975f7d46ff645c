package kvevents

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Tail-probe outcomes: the result label of kvroute_kv_events_probes_total.
const (
	probeEmpty    = "empty"    // nothing was missing (not counted as a replay)
	probeRepaired = "repaired" // the probe found and applied missed batches
	probeFailed   = "failed"   // the replay socket did not answer
)

// streamMetrics are the subscriber pool's liveness and replay metrics that
// complement Metrics: what an operator needs to see an endpoint stuck in a
// replay, replays queueing for slots, and probes that found nothing.
type streamMetrics struct {
	// ReplayInProgress is 1 while a replay of the endpoint runs.
	ReplayInProgress *prometheus.GaugeVec
	// ReplaySlotWait observes how long each replay attempt waited for one
	// of the process-wide replay slots.
	ReplaySlotWait prometheus.Histogram
	// Probes counts replays that only checked nothing was missing: the tail
	// probe after a stream went quiet, and the verification after a
	// reconnect, by result (empty, repaired, failed).
	Probes *prometheus.CounterVec
	// lv: publisher identities and heartbeats (metrics_liveness.go).
	lv *livenessMetrics
}

// newStreamMetrics creates the streams' metrics and registers them through
// r (a family already registered on its registry is reused).
func newStreamMetrics(r *registrar) (*streamMetrics, error) {
	m := &streamMetrics{
		ReplayInProgress: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kvroute_kv_events_replay_in_progress",
			Help: "1 while a replay of the endpoint runs (live messages wait for it).",
		}, []string{"pod_identifier"}),
		ReplaySlotWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kvroute_kv_events_replay_slot_wait_seconds",
			Help:    "Time each replay attempt waited for a process-wide replay slot.",
			Buckets: []float64{0.001, 0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120},
		}),
		Probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_kv_events_probes_total",
			Help: "Replay probes (quiet-tail and reconnect checks) by result: empty, repaired, failed.",
		}, []string{"pod_identifier", "result"}),
	}
	m.ReplayInProgress = register(r, m.ReplayInProgress)
	m.ReplaySlotWait = register(r, m.ReplaySlotWait)
	m.Probes = register(r, m.Probes)
	m.lv = newLivenessMetrics(r)
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

// forget deletes the endpoint's series.
func (m *streamMetrics) forget(endpoint string) {
	l := prometheus.Labels{"pod_identifier": endpoint}
	m.ReplayInProgress.DeletePartialMatch(l)
	m.Probes.DeletePartialMatch(l)
	m.lv.forget(endpoint)
}
