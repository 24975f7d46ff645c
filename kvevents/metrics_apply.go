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
// event's cache kind as the publisher sent it, labelled through
// cacheKindLabel.
func (m *applyMetrics) skip(kind string, reason Reason, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.StoresSkipped.WithLabelValues(cacheKindLabel(kind), string(reason)).Add(float64(n))
}

// cacheKindLabels are the cache_kind label values kept as they are: the
// values of vLLM's KVCacheSpecKind (vllm/v1/kv_cache_interface.py), the
// kv_cache_spec_kind strings its engines publish. "unknown" is vLLM's own
// kind for a spec it cannot name, and also the label the Applier gives a
// removal for a group no store named (skipUnknownGroup).
var cacheKindLabels = map[string]bool{
	"full_attention": true, "mla_attention": true, "sliding_window": true, "sliding_window_mla": true,
	"mamba": true, "chunked_local_attention": true, "sink_full_attention": true,
	"encoder_only_attention": true, "cross_attention": true, "unknown": true,
}

// cacheKindLabel is kind as a cache_kind label value: one of vLLM's cache
// kinds as it is, "none" for an event without one, and "other" for any
// other string, so that a publisher's made-up kinds add no series.
func cacheKindLabel(kind string) string {
	switch {
	case kind == "":
		return "none"
	case cacheKindLabels[kind]:
		return kind
	}
	return "other"
}
