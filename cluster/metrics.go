package cluster

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

// Redis operations, the op label of the error counter.
const (
	opRefresh = iota
	opRead
	opPublish
	opSubscribe
	numOps
)

var opNames = [numOps]string{"refresh", "read", "publish", "subscribe"}

// Reasons a decision is not published or not applied.
const (
	dropQueueFull = iota
	dropRedis
	dropTooLarge
	dropNoKeys    // a peer's decision with no block keys, which no replica publishes
	dropOwnSender // a decision received under this replica's own ID, not its echo
	numDrops
)

var dropNames = [numDrops]string{"queue_full", "redis_error", "too_large", "no_keys", "own_sender"}

// Reasons a load change is not published or not applied.
const (
	deltaDropQueueFull = iota
	deltaDropRedis
	deltaDropMemory
	deltaDropDegraded
	deltaDropTooLarge
	deltaDropStale
	deltaDropOwnSender
	numDeltaDrops
)

var deltaDropNames = [numDeltaDrops]string{"queue_full", "redis_error", "memory", "degraded", "too_large", "stale", "own_sender"}

// Reasons a loaded endpoint is left out of this replica's record.
const (
	recordDropMax   = iota // beyond MaxEndpoints
	recordDropBytes        // beyond what a record every peer accepts holds
	numRecordDrops
)

var recordDropNames = [numRecordDrops]string{"max_endpoints", "record_size"}

// Reasons an admission band with requests waiting is left out of this
// replica's record (queues.go).
const (
	queueBandDropPriority = iota // priority beyond ±maxQueuePriority
	queueBandDropMax             // beyond maxQueueBands
	numQueueBandDrops
)

var queueBandDropNames = [numQueueBandDrops]string{"priority_range", "max_bands"}

type metrics struct {
	degraded          prometheus.Gauge
	outages           prometheus.Counter
	errors            [numOps]prometheus.Counter
	commands          prometheus.Counter
	peers             prometheus.Gauge
	peersIgnored      prometheus.Counter
	invalidRecords    prometheus.Counter
	staleRecords      prometheus.Counter
	queueBandsDropped prometheus.Counter
	endpointsDropped  [numEpDrops]prometheus.Counter
	// recordLoadsDropped counts loaded endpoints left out of a record.
	recordLoadsDropped [numRecordDrops]prometheus.Counter
	// recordQueueBandsDropped counts admission bands left out of a record.
	recordQueueBandsDropped [numQueueBandDrops]prometheus.Counter
	staleness               prometheus.Gauge
	published               prometheus.Counter
	publishedBytes          prometheus.Counter
	messages                prometheus.Counter
	dropped                 [numDrops]prometheus.Counter
	received                prometheus.Counter
	invalidMsgs             prometheus.Counter
	truncated               prometheus.Counter
	refused                 [numRefusals]prometheus.Counter

	deltasPublished  prometheus.Counter
	deltasApplied    prometheus.Counter
	deltasSuperseded prometheus.Counter
	deltasDropped    [numDeltaDrops]prometheus.Counter
	pendingBytes     prometheus.Gauge

	sessions sessionMetrics // sessions.go

	// cs are every collector, the ones newMetrics registered and Close
	// unregisters.
	cs []prometheus.Collector
}

// newMetrics builds the replica's metrics and registers them through set,
// all or none.
func newMetrics(set telemetry.Set) (*metrics, error) {
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_cluster_redis_errors_total",
		Help: "Failed or timed-out Redis operations by operation (refresh, read, publish, subscribe).",
	}, []string{"op"})
	drops := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_cluster_decisions_dropped_total",
		Help: "Routing decisions not shared with the other replicas or not applied, by reason (queue_full: the publish queue was full; redis_error: the publish failed; too_large: larger than a message on its own, an endpoint name of about 1 MiB; no_keys: a received decision with no block keys, which no replica publishes; own_sender: a received decision under this replica's own ID in a message not headed as this replica heads its own, a forged or broken sender; its own messages, echoed by the channel, are skipped uncounted).",
	}, []string{"reason"})
	deltaDrops := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_cluster_load_changes_dropped_total",
		Help: "Load changes (dispatches, releases) not shared or not applied, by reason (queue_full: this replica's publish queue was full; redis_error: the publish failed; memory: over maxPendingDeltaBytes or maxPeers here; degraded: received while this replica routes on local load, Redis unreachable; too_large: larger than a message on its own, an endpoint name of about 1 MiB; stale: a peer's change still above its live record 2 × lease after it arrived, numbered beyond anything its records reach, a forged or broken sender; own_sender: received under this replica's own ID in a message not headed as this replica heads its own, a forged or broken sender). The peers then go by the next record.",
	}, []string{"reason"})
	epDrops := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_cluster_endpoints_dropped_total",
		Help: "Endpoint names read from Redis (in peers' records, load changes and decisions) and ignored, by reason (unknown_endpoint: not one of this replica's endpoints; invalid_name: empty, over 1,024 bytes or not UTF-8). A record's endpoints count at every read.",
	}, []string{"reason"})
	recDrops := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_cluster_record_loads_dropped_total",
		Help: "Loaded endpoints of this replica left out of a record it published, by reason (max_endpoints: beyond maxEndpoints; record_size: beyond the 1 MiB a record every peer accepts holds, with long endpoint names). The peers do not see that load until fewer endpoints are loaded. Counted at every refresh that leaves one out.",
	}, []string{"reason"})
	bandDrops := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_cluster_record_queue_bands_dropped_total",
		Help: "Admission priority bands of this replica with requests waiting left out of a record it published, by reason (priority_range: a priority beyond ±2^31; max_bands: beyond the first 64 such bands, highest priority first). The peers' kvroute_admission_fleet_queue_size leaves those requests out. Counted at every refresh that leaves one out.",
	}, []string{"reason"})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_cluster_redis_replies_refused_total",
		Help: "Parts of Redis replies refused before go-redis read them into memory, by reason (string_too_long: a string over a record's or decision message's size, read as the empty string and counted again as an invalid record or message; line_too_long, too_many_elements, nested_too_deep, reply_too_large, malformed: the connection is dropped and the command fails).",
	}, []string{"reason"})
	m := &metrics{
		staleRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_stale_records_total",
			Help: "Peer records whose send time is more than a lease from now (older, or ahead): not live peers, whatever the key's TTL.",
		}),
		queueBandsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_queue_bands_dropped_total",
			Help: "Admission queue depths in peers' records for a priority band this replica does not have (ignored); counted at every read.",
		}),
		deltasPublished: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_load_changes_published_total",
			Help: "This replica's load changes (dispatches, releases) published with the decision messages.",
		}),
		deltasApplied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_load_changes_applied_total",
			Help: "Peers' load changes applied to the peer load between their records.",
		}),
		deltasSuperseded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_load_changes_superseded_total",
			Help: "Peers' load changes received after a record that already included them (discarded).",
		}),
		pendingBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvroute_cluster_load_changes_pending_bytes",
			Help: "Memory of the peers' load changes held until a record of theirs includes them.",
		}),
		degraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvroute_cluster_degraded",
			Help: "1 while Redis is unreachable or slow and the replica routes on its local state only; 0 when the shared state is current.",
		}),
		outages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_outages_total",
			Help: "Times the replica entered degraded (local-only) mode.",
		}),
		commands: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_redis_commands_total",
			Help: "Redis commands this replica sent (lease refresh, peer reads, decision publishes).",
		}),
		peers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvroute_cluster_peers",
			Help: "Live peer replicas (leases not expired) at the last read.",
		}),
		peersIgnored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_peers_ignored_total",
			Help: "Peer records skipped because the pool has more than maxPeers replicas.",
		}),
		invalidRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_invalid_records_total",
			Help: "Peer records that could not be decoded (ignored), member-set entries that are no replica ID, and snapshot URLs that are no http(s) URL (the peer is listed without one).",
		}),
		staleness: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvroute_cluster_staleness_bound_seconds",
			Help: "Longest a peer's load change takes to reach this replica while Redis is healthy: refresh period + read period + 2 × operation timeout.",
		}),
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_decisions_published_total",
			Help: "Routing decisions published to the other replicas.",
		}),
		publishedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_decision_bytes_total",
			Help: "Bytes of decision messages published (divide by decisions published for bytes per decision).",
		}),
		messages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_decision_messages_total",
			Help: "Decision messages published (one message batches the decisions queued meanwhile).",
		}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_decisions_applied_total",
			Help: "Other replicas' routing decisions applied as speculative index entries.",
		}),
		invalidMsgs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_invalid_messages_total",
			Help: "Decision messages that could not be decoded (the rest of the message is ignored).",
		}),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_cluster_decisions_truncated_total",
			Help: "Decisions whose keys were cut to maxKeysPerDecision before publishing.",
		}),
	}
	for i := range m.errors {
		m.errors[i] = errs.WithLabelValues(opNames[i])
	}
	for i := range m.dropped {
		m.dropped[i] = drops.WithLabelValues(dropNames[i])
	}
	for i := range m.endpointsDropped {
		m.endpointsDropped[i] = epDrops.WithLabelValues(epDropNames[i])
	}
	for i := range m.refused {
		m.refused[i] = refused.WithLabelValues(refuseNames[i])
	}
	for i := range m.recordLoadsDropped {
		m.recordLoadsDropped[i] = recDrops.WithLabelValues(recordDropNames[i])
	}
	for i := range m.recordQueueBandsDropped {
		m.recordQueueBandsDropped[i] = bandDrops.WithLabelValues(queueBandDropNames[i])
	}
	for i := range m.deltasDropped {
		m.deltasDropped[i] = deltaDrops.WithLabelValues(deltaDropNames[i])
	}
	m.cs = []prometheus.Collector{m.degraded, m.outages, errs, m.commands, m.peers, m.peersIgnored,
		m.invalidRecords, m.staleness, m.published, m.publishedBytes, m.messages, drops, m.received, m.invalidMsgs, m.truncated,
		m.deltasPublished, m.deltasApplied, m.deltasSuperseded, deltaDrops, m.pendingBytes, m.staleRecords, epDrops, m.queueBandsDropped, refused, recDrops, bandDrops}
	m.cs = append(m.cs, m.sessions.init()...)
	if err := set.Register(m.cs...); err != nil {
		return nil, err
	}
	return m, nil
}

// refusal counts a part of a Redis reply refused for reason (respbound.go);
// it runs on go-redis's goroutines.
func (m *metrics) refusal(reason int) { m.refused[reason].Inc() }
