package kvindex

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

// metrics exports the index's metrics: llm-d's lookup latency, requests and
// hits, and kvroute's block, membership, accounted-bytes and eviction series. Lookups update two
// atomic counters and one histogram; gauges and eviction counters are read
// from the index's own atomics at scrape time.
type metrics struct {
	lookups atomic.Uint64
	hits    atomic.Uint64
	latency prometheus.Histogram

	// cs are the collectors New registered, which Close unregisters.
	cs []prometheus.Collector
}

// newMetrics builds the index's collectors and registers them through set,
// all or none.
func newMetrics(ix *Index, set telemetry.Set) (*metrics, error) {
	m := &metrics{
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "llm_d_epp_kv_cache_index_lookup_latency_seconds",
			Help:    "Latency of KV-block index lookups (Match).",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10), // 1 µs … 262 ms
		}),
	}
	cs := []prometheus.Collector{
		m.latency,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "llm_d_epp_kv_cache_index_lookup_requests_total",
			Help: "KV-block index lookups (Match calls).",
		}, func() float64 { return float64(m.lookups.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "llm_d_epp_kv_cache_index_lookup_hits_total",
			Help: "Contiguous prefix blocks from block 0 held by the best candidate, summed over lookups.",
		}, func() float64 { return float64(m.hits.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kvroute_kv_index_blocks",
			Help: "Distinct blocks in the KV-block index.",
		}, func() float64 { return float64(ix.nBlocks.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kvroute_kv_index_memberships",
			Help: "(block, endpoint) memberships in the KV-block index, speculative included.",
		}, func() float64 { return float64(ix.nMembers.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kvroute_kv_index_bytes",
			Help: "Memory accounted by the KV-block index, in bytes (bounded by its maxBytes).",
		}, func() float64 { return float64(ix.nBytes.Load()) }),
	}
	for reason, v := range map[string]*atomic.Uint64{
		"capacity":            &ix.evCapacity,
		"speculative_expired": &ix.evExpired,
		"endpoint_removed":    &ix.evEndpoint,
		"memory":              &ix.evMemory,
	} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "kvroute_kv_index_evictions_total",
			Help:        "Entries removed by the KV-block index itself, by reason.",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 { return float64(v.Load()) }))
	}
	if err := set.Register(cs...); err != nil {
		return nil, err
	}
	m.cs = cs
	return m, nil
}

// observeLookup records one Match.
func (m *metrics) observeLookup(bestBlocks int, d time.Duration) {
	m.lookups.Add(1)
	if bestBlocks > 0 {
		m.hits.Add(uint64(bestBlocks))
	}
	m.latency.Observe(d.Seconds())
}
