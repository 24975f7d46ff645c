package kvevents

import (
	"github.com/prometheus/client_golang/prometheus"
)

// eventMetrics holds the Pool's KV-event metrics: subscribers, messages,
// transport errors, queues, sequence gaps, replays and bind-mode refusals,
// plus the Applier's (applyMetrics, embedded), which the Pool's Applier
// shares so that each family is registered once and the Pool counts its own
// drops in the same dropped_total. The stream's replay and probe metrics
// are in streamMetrics. A nil *eventMetrics is valid: its methods do
// nothing.
type eventMetrics struct {
	*applyMetrics

	// llm_d_epp_kv_cache_events_active_subscribers (gauge).
	ActiveSubscribers prometheus.Gauge
	// llm_d_epp_kv_cache_events_messages_received_total{pod_identifier}.
	MessagesReceived *prometheus.CounterVec
	// llm_d_epp_kv_cache_events_zmq_errors_total{pod_identifier,operation}.
	ZMQErrors *prometheus.CounterVec
	// llm_d_epp_kv_cache_events_subscriber_reconnections_total{pod_identifier}.
	Reconnections *prometheus.CounterVec
	// llm_d_epp_kv_cache_events_pool_queue_depth (gauge).
	PoolQueueDepth prometheus.Gauge
	// llm_d_epp_kv_cache_events_pool_capacity (gauge).
	PoolCapacity prometheus.Gauge
	// kvroute_kv_events_sequence_gaps_total{pod_identifier}.
	SequenceGaps *prometheus.CounterVec
	// kvroute_kv_events_publisher_restarts_total{pod_identifier}.
	PublisherRestarts *prometheus.CounterVec
	// kvroute_kv_events_replays_total{pod_identifier,result}.
	Replays *prometheus.CounterVec
	// kvroute_kv_events_pool_queue_bytes (gauge): payload bytes waiting
	// for a worker.
	PoolQueueBytes prometheus.Gauge
	// kvroute_kv_events_queue_shed_bytes_total: payload bytes of messages
	// dropped by the worker queues' byte or message bounds (the messages
	// are counted in dropped_total{reason="queue_full"}).
	QueueShedBytes prometheus.Counter
	// kvroute_kv_events_bind_unknown_total: bind-mode messages whose topic
	// names no indexed endpoint (unknown or unparsable topic, endpoint not
	// passed to Ensure, stream cap reached). One unlabelled series: topics
	// come from the wire and never become label values.
	BindUnknown prometheus.Counter
	// kvroute_kv_events_bind_foreign_total: bind-mode messages for a known
	// endpoint that arrived on another connection while the endpoint's own
	// connection was alive (a spoofing or misconfigured peer); dropped.
	BindForeign prometheus.Counter
	// kvroute_kv_events_bind_source_mismatch_total: bind-mode messages
	// refused because their connection does not come from the address of
	// the endpoint their topic names (PoolConfig.BindAnySource). One
	// unlabelled series: the topic and the address come from the wire.
	BindSourceMismatch prometheus.Counter
	// kvroute_kv_events_topic_model_unknown_total{pod_identifier}: messages
	// of an endpoint listing Endpoint.Models whose topic names a model it
	// does not serve; indexed under Endpoint.Model.
	TopicModelUnknown *prometheus.CounterVec
	// kvroute_kv_events_endpoints_not_selected (gauge): endpoints passed to
	// Ensure whose labels Options.Matcher does not match, so not subscribed
	// on purpose (decode-only pods of a P/D pool, say). With
	// active_subscribers it accounts for every endpoint the pool was given.
	NotSelected prometheus.Gauge
}

// newMetrics creates the Pool's KV-event metrics (the Applier's included)
// and registers them through r. When a family is already registered on r's
// registry (a second Pool on the same registry), the existing collector is
// reused, so counts from both land in one series.
func newMetrics(r *registrar) (*eventMetrics, error) {
	am, err := newApplyMetrics(r)
	if err != nil {
		return nil, err
	}
	m := &eventMetrics{
		applyMetrics: am,
		ActiveSubscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "llm_d_epp_kv_cache_events_active_subscribers",
			Help: "KV-event subscribers managed, including those retrying a failed connection.",
		}),
		MessagesReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llm_d_epp_kv_cache_events_messages_received_total",
			Help: "KV-event messages received per endpoint.",
		}, []string{"pod_identifier"}),
		ZMQErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llm_d_epp_kv_cache_events_zmq_errors_total",
			Help: "ZeroMQ and decoding errors per endpoint and operation. A replay attempt kvroute itself cut off (the replay superseded or cut short, the endpoint removed, the pool closing) is not the engine's error and is not counted.",
		}, []string{"pod_identifier", "operation"}),
		Reconnections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llm_d_epp_kv_cache_events_subscriber_reconnections_total",
			Help: "KV-event subscriber reconnects per endpoint.",
		}, []string{"pod_identifier"}),
		PoolQueueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "llm_d_epp_kv_cache_events_pool_queue_depth",
			Help: "KV-event messages waiting for a worker.",
		}),
		PoolCapacity: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "llm_d_epp_kv_cache_events_pool_capacity",
			Help: "Total KV-event queue capacity.",
		}),
		SequenceGaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_kv_events_sequence_gaps_total",
			Help: "KV-event sequence gaps detected per endpoint (with or without replay).",
		}, []string{"pod_identifier"}),
		PublisherRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_kv_events_publisher_restarts_total",
			Help: "KV-event sequence went backwards (engine restarted) per endpoint.",
		}, []string{"pod_identifier"}),
		Replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_kv_events_replays_total",
			Help: "KV-event replays per endpoint by outcome (complete, partial, failed).",
		}, []string{"pod_identifier", "result"}),
		PoolQueueBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvroute_kv_events_pool_queue_bytes",
			Help: "KV-event payload bytes waiting for a worker.",
		}),
		QueueShedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_kv_events_queue_shed_bytes_total",
			Help: "Payload bytes of KV-event messages dropped by the worker queue bounds.",
		}),
		BindUnknown: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_kv_events_bind_unknown_total",
			Help: "Bind-mode KV-event messages dropped because their topic names no indexed endpoint.",
		}),
		BindForeign: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_kv_events_bind_foreign_total",
			Help: "Bind-mode KV-event messages for a known endpoint dropped because another connection owns it.",
		}),
		BindSourceMismatch: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_kv_events_bind_source_mismatch_total",
			Help: "Bind-mode KV-event messages refused because their connection does not come from the address of the endpoint their topic names.",
		}),
		TopicModelUnknown: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_kv_events_topic_model_unknown_total",
			Help: "KV-event messages whose topic names a model the endpoint does not list among its served models; indexed under its configured model.",
		}, []string{"pod_identifier"}),
		NotSelected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvroute_kv_events_endpoints_not_selected",
			Help: "Endpoints known to the KV-event pool whose labels the event selector does not match: not subscribed, on purpose (decode-only pods, say).",
		}),
	}
	m.ActiveSubscribers = register(r, m.ActiveSubscribers)
	m.MessagesReceived = register(r, m.MessagesReceived)
	m.ZMQErrors = register(r, m.ZMQErrors)
	m.Reconnections = register(r, m.Reconnections)
	m.PoolQueueDepth = register(r, m.PoolQueueDepth)
	m.PoolCapacity = register(r, m.PoolCapacity)
	m.SequenceGaps = register(r, m.SequenceGaps)
	m.PublisherRestarts = register(r, m.PublisherRestarts)
	m.Replays = register(r, m.Replays)
	m.PoolQueueBytes = register(r, m.PoolQueueBytes)
	m.QueueShedBytes = register(r, m.QueueShedBytes)
	m.BindUnknown = register(r, m.BindUnknown)
	m.BindForeign = register(r, m.BindForeign)
	m.BindSourceMismatch = register(r, m.BindSourceMismatch)
	m.TopicModelUnknown = register(r, m.TopicModelUnknown)
	m.NotSelected = register(r, m.NotSelected)
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

// drop counts n events of endpoint dropped for reason.
func (m *eventMetrics) drop(endpoint string, reason Reason, n int) {
	if m != nil {
		m.applyMetrics.drop(endpoint, reason, n)
	}
}

// forgetEndpoint deletes every series labelled with endpoint, for an
// endpoint that left the pool (keeps the metric cardinality bounded).
func (m *eventMetrics) forgetEndpoint(endpoint string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"pod_identifier": endpoint}
	for _, v := range []*prometheus.CounterVec{m.MessagesReceived, m.ZMQErrors, m.Reconnections,
		m.Dropped, m.SequenceGaps, m.PublisherRestarts, m.Replays, m.TopicModelUnknown} {
		v.DeletePartialMatch(l)
	}
}
