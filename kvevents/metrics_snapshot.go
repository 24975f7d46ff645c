package kvevents

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/kvevents/snapshot"
)

// snapshotMetrics count the streams' engine-snapshot loads and what each
// endpoint's index entries were rebuilt from.
type snapshotMetrics struct {
	// loads counts snapshot loads by result (loaded, failed).
	loads *prometheus.CounterVec
	// errors counts failed snapshot attempts by operation (the client's Op
	// values) and refused replies by protocol reason: every reply kvroute
	// did not understand is counted here, never applied. Attempts kvroute
	// cut off itself (snapshot.Error.Canceled) are not the engine's errors
	// and are not counted; a load abandoned because its reply did not
	// come in time while live messages waited counts once, as "stalled".
	errors *prometheus.CounterVec
	// bytes observes the size of each loaded snapshot.
	bytes prometheus.Histogram
	// sources counts, per endpoint, each time its entries were rebuilt and
	// from what (live, replay, engine_snapshot, recorded).
	sources *prometheus.CounterVec
}

func newSnapshotMetrics(r *registrar) (*snapshotMetrics, error) {
	m := &snapshotMetrics{
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_kv_events_snapshot_loads_total",
			Help: "Engine KV-cache snapshot loads by result: loaded, failed (a replay ran instead).",
		}, []string{"pod_identifier", "result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_kv_events_snapshot_errors_total",
			Help: "Failed engine snapshot attempts by reason: the client operation (capacity, connect, send, receive, unavailable) or, for a reply kvroute does not understand, the protocol reason; chunk_decode for a chunk that is not a KV-event batch; publisher_mismatch for a snapshot of another publisher than the live stream's; seq_out_of_range for one whose sequence is more than the replay lookahead behind or ahead of the live stream's; stalled for a load abandoned because its reply had not arrived while live messages waited longer than a replay of the same range may keep them. An attempt kvroute itself cut off (the load superseded, the endpoint removed, the pool closing) is not the engine's error and is not counted.",
		}, []string{"pod_identifier", "reason"}),
		bytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kvroute_kv_events_snapshot_bytes",
			Help:    "Size of each loaded engine snapshot (its chunks) in bytes.",
			Buckets: prometheus.ExponentialBuckets(1<<10, 4, 11),
		}),
		sources: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_kv_events_index_source_total",
			Help: "Times an endpoint's index entries were rebuilt, by source: live, replay, engine_snapshot, recorded (checkpoint or peer, verified by replay).",
		}, []string{"pod_identifier", "source"}),
	}
	m.loads = register(r, m.loads)
	m.errors = register(r, m.errors)
	m.bytes = register(r, m.bytes)
	m.sources = register(r, m.sources)
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

func (m *snapshotMetrics) load(id, result string) { m.loads.WithLabelValues(id, result).Inc() }

func (m *snapshotMetrics) refused(id, reason string) { m.errors.WithLabelValues(id, reason).Inc() }

func (m *snapshotMetrics) source(id, src string) { m.sources.WithLabelValues(id, src).Inc() }

// attemptError counts a failed attempt: a protocol violation under its
// reason (a fixed set, never a value from the wire), others under the op.
// An attempt kvroute cut off (the load superseded, the endpoint removed,
// the pool closing) is not the engine's error and is not counted.
func (m *snapshotMetrics) attemptError(id string, e *snapshot.Error) {
	if e.Canceled {
		return
	}
	var pe *snapshot.ProtocolError
	if errors.As(e, &pe) {
		m.refused(id, pe.Reason)
		return
	}
	m.refused(id, e.Op)
}

func (m *snapshotMetrics) forget(endpoint string) {
	l := prometheus.Labels{"pod_identifier": endpoint}
	m.loads.DeletePartialMatch(l)
	m.errors.DeletePartialMatch(l)
	m.sources.DeletePartialMatch(l)
}
