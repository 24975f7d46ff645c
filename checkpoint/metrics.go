package checkpoint

import "github.com/prometheus/client_golang/prometheus"

// metrics are the checkpoint, restore and serving metrics.
type metrics struct {
	restores            *prometheus.CounterVec
	restoredMemberships prometheus.Gauge
	writes              *prometheus.CounterVec
	lastWrite           prometheus.Gauge
	bytes               prometheus.Gauge
	serves              *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		restores: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_index_restore_total",
			Help: "Attempts to start the index from a source (file, peer) by result: loaded, missing, redis_unreachable (the pool's Redis did not answer the listing of its replicas), busy, truncated, checksum, bad_magic, format_version, key_scheme, block_size, malformed, too_large, conflict, read_error, refused, timeout, unreachable.",
		}, []string{"source", "result"}),
		restoredMemberships: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvroute_index_restored_memberships",
			Help: "Memberships the index started with (0 when it started empty).",
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_checkpoint_writes_total",
			Help: "Checkpoint file writes by result (ok; error: the previous checkpoint is kept; not_durable: the new checkpoint is in place, but the directory sync after its rename failed, so a crash may bring back the previous one).",
		}, []string{"result"}),
		lastWrite: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvroute_checkpoint_last_success_timestamp_seconds",
			Help: "Unix time of the last successful checkpoint write (a not_durable write is not one).",
		}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvroute_checkpoint_bytes",
			Help: "Size of the last checkpoint written.",
		}),
		serves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_snapshot_serves_total",
			Help: "Snapshots served to peers by result (ok, unauthorized: no valid proof of bootstrap.token for this replica's URL, clock_skew: a valid proof dated beyond bootstrap.maxClockSkew, method_not_allowed, error, busy: 4 were being served already, stalled: the peer stopped reading for bootstrap.serveWriteTimeout, too_slow: the peer read slower on average than bootstrap.serveMinRate).",
		}, []string{"result"}),
	}
	for _, r := range []string{"ok", "error", "not_durable"} {
		m.writes.WithLabelValues(r)
	}
	return m
}

// collectors lists the metrics, in registration order.
func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.restores, m.restoredMemberships, m.writes, m.lastWrite, m.bytes, m.serves}
}
