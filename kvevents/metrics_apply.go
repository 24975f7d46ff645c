package kvevents

import "github.com/prometheus/client_golang/prometheus"

// applyMetrics are the Applier's metrics: what it leaves out of the index
// and what it drops. A Pool's Applier shares the Pool's (see eventMetrics),
// so each family is registered once. A nil *applyMetrics is valid: its
// methods do nothing.
type applyMetrics struct {
	// llm_d_epp_kv_cache_events_stores_skipped_total{cache_kind,reason}.
	StoresSkipped *prometheus.CounterVec
	// kvroute_kv_events_dropped_total{pod_identifier,reason}.
	Dropped *prometheus.CounterVec
}

// newApplyMetrics creates the Applier's metrics and registers them through
// r (a family already registered on its registry is reused).
func newApplyMetrics(r *registrar) (*applyMetrics, error) {
	m := &applyMetrics{
		StoresSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llm_d_epp_kv_cache_events_stores_skipped_total",
			Help: "KV-cache events left out of the index (non-prefix cache groups, non-dense spans, extra keys or unmapped blocks at another block size, unknown groups).",
		}, []string{"cache_kind", "reason"}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_kv_events_dropped_total",
			Help: "KV events dropped, by endpoint and reason (parent_missing, decode_error, queue_full, stale_seq, unknown_event, ...).",
		}, []string{"pod_identifier", "reason"}),
	}
	m.StoresSkipped = register(r, m.StoresSkipped)
	m.Dropped = register(r, m.Dropped)
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

// drop counts n events of endpoint dropped for reason.
func (m *applyMetrics) drop(endpoint string, reason Reason, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.Dropped.WithLabelValues(endpoint, string(reason)).Add(float64(n))
}

// skip counts n events left out of the index for reason; kind is the
// event's cache kind ("" is reported as "none").
func (m *applyMetrics) skip(kind string, reason Reason, n int) {
	if m == nil || n <= 0 {
		return
	}
	if kind == "" {
		kind = "none"
	}
	m.StoresSkipped.WithLabelValues(kind, string(reason)).Add(float64(n))
}
