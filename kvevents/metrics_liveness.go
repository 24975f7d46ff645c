package kvevents

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// Event fields the index does not key on: the field label of
// kvroute_kv_events_unindexed_fields_total (fixed strings, never wire
// values).
const (
	fieldLocality  = "locality"
	fieldOwnership = "ownership"
	fieldSessionID = "session_id"
)

// livenessMetrics are what vLLM's publisher identity and idle heartbeats
// (its snapshot revision) tell about an endpoint, and the event fields of
// that revision the index cannot use.
type livenessMetrics struct {
	// Heartbeats counts batches without events (an idle publisher's
	// heartbeat), per endpoint.
	Heartbeats *prometheus.CounterVec
	// HeartbeatTimeouts counts the times a publisher that sends heartbeats
	// fell silent for PoolConfig.PublisherSilence, per endpoint.
	HeartbeatTimeouts *prometheus.CounterVec
	// IdentityChanges counts publisher restarts seen through a new
	// publisher identity (each also counts in publisher_restarts_total).
	IdentityChanges *prometheus.CounterVec
	// UnindexedFields counts events carrying a field the index does not
	// key on (locality, ownership, session_id), per endpoint and field.
	UnindexedFields *prometheus.CounterVec
}

// newLivenessMetrics creates the metrics and registers them through r.
func newLivenessMetrics(r *registrar) *livenessMetrics {
	m := &livenessMetrics{
		Heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_kv_events_heartbeats_total",
			Help: "Batches without events (idle publishers' heartbeats) received.",
		}, []string{"pod_identifier"}),
		HeartbeatTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_kv_events_heartbeat_timeouts_total",
			Help: "Times a publisher that sends heartbeats went silent for longer than publisherSilence (the endpoint is degraded until it is heard again).",
		}, []string{"pod_identifier"}),
		IdentityChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_kv_events_publisher_identity_changes_total",
			Help: "Publisher restarts seen through a new publisher identity (vLLM's publisher_id, SGLang's topic epoch).",
		}, []string{"pod_identifier"}),
		UnindexedFields: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_kv_events_unindexed_fields_total",
			Help: "Events carrying a field the index does not key on (locality, ownership, session_id), by field.",
		}, []string{"pod_identifier", "field"}),
	}
	m.Heartbeats = register(r, m.Heartbeats)
	m.HeartbeatTimeouts = register(r, m.HeartbeatTimeouts)
	m.IdentityChanges = register(r, m.IdentityChanges)
	m.UnindexedFields = register(r, m.UnindexedFields)
	return m
}

// forget deletes the endpoint's series.
func (m *livenessMetrics) forget(endpoint string) {
	l := prometheus.Labels{"pod_identifier": endpoint}
	m.Heartbeats.DeletePartialMatch(l)
	m.HeartbeatTimeouts.DeletePartialMatch(l)
	m.IdentityChanges.DeletePartialMatch(l)
	m.UnindexedFields.DeletePartialMatch(l)
}

// countUnindexed counts the events of b that carry locality, ownership or
// session_id. The index keys blocks by endpoint, tier (medium, STORAGE
// included), group and key: a remote copy, a secondary tier's copy and the
// session that stored a block are not part of that key, so these values are
// decoded, kept on the event for an Applier's caller, and counted here.
func (m *livenessMetrics) countUnindexed(endpoint string, b *wire.Batch) {
	var loc, own, sess int
	for i := range b.Events {
		e := &b.Events[i]
		if e.Locality != "" {
			loc++
		}
		if e.Ownership != "" {
			own++
		}
		if e.SessionID != "" {
			sess++
		}
	}
	for _, c := range [...]struct {
		field string
		n     int
	}{{fieldLocality, loc}, {fieldOwnership, own}, {fieldSessionID, sess}} {
		if c.n > 0 {
			m.UnindexedFields.WithLabelValues(endpoint, c.field).Add(float64(c.n))
		}
	}
}
