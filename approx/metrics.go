package approx

import "github.com/prometheus/client_golang/prometheus"

// Reasons of kvroute_approx_evictions_total.
const (
	reasonCapacity = iota // the endpoint's capacity (GPU + CPU blocks)
	reasonMemory          // the endpoint's share of Config.MaxBytes
	reasonExpired         // Config.TTL passed
	reasonLive            // the endpoint's KV events became live: precise from now on
	reasonRemoved         // the endpoint left the router's endpoints
	reasonDropped         // Drop
	numReasons
)

var reasonNames = [numReasons]string{
	reasonCapacity: "capacity", reasonMemory: "memory", reasonExpired: "expired",
	reasonLive: "live", reasonRemoved: "removed", reasonDropped: "dropped",
}

// metrics are the index's metrics.
type metrics struct {
	recorded  prometheus.Counter
	evicted   [numReasons]prometheus.Counter
	fallbacks map[string]prometheus.Counter // by Fallback constant
}

func newMetrics(x *Index, reg prometheus.Registerer) (*metrics, error) {
	recorded := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kvroute_approx_recorded_blocks_total",
		Help: "Block keys the approximate index recorded from the router's decisions (sent to an endpoint whose KV events are not live).",
	})
	evicted := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_approx_evictions_total",
		Help: "Approximate entries removed, by reason: capacity (the engine's GPU + CPU blocks), memory (the index's byte bound), expired (TTL), live (the endpoint's KV events became live), removed (endpoint removed), dropped.",
	}, []string{"reason"})
	entries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kvroute_approx_entries",
		Help: "Approximate entries held over all endpoints.",
	}, func() float64 { return float64(x.entries.Load()) })
	bytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kvroute_approx_bytes",
		Help: "Accounted memory of the approximate index (bounded by its maxBytes).",
	}, func() float64 { return float64(x.slots.Load() * slotBytes) })
	fallbacks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvroute_approx_capacity_fallbacks_total",
		Help: "Times an endpoint's approximate-index capacity fell back from its engine's own (counted once per endpoint and episode), by reason: metrics_unavailable (the engine's metrics not read within the TTL: its configured or default capacity applies), unreported (no vllm:cache_config_info), invalid (its block counts are not numbers), offload_unsized (the engine offloads to CPU without reporting the tier's size and no capacity.cpuBlocks is configured: sized to GPU blocks only).",
	}, []string{"reason"})
	m := &metrics{recorded: recorded, fallbacks: map[string]prometheus.Counter{}}
	for _, r := range fallbackNames {
		m.fallbacks[r] = fallbacks.WithLabelValues(r)
	}
	for i, n := range reasonNames {
		m.evicted[i] = evicted.WithLabelValues(n)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{recorded, evicted, fallbacks, entries, bytes, &modeCollector{x: x}} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// modeCollector exports kvroute_approx_endpoint_mode{endpoint, mode}: 1 for
// each known endpoint's current mode, 0 for the others; and, when the index
// is enabled, kvroute_approx_endpoint_capacity_blocks{endpoint, source}.
type modeCollector struct{ x *Index }

var modeDesc = prometheus.NewDesc("kvroute_approx_endpoint_mode",
	"Each endpoint's cache mode (1 for the current one): precise (KV events live), approximate (the router's own decisions), blind (no cache information).",
	[]string{"endpoint", "mode"}, nil)

var capacityDesc = prometheus.NewDesc("kvroute_approx_endpoint_capacity_blocks",
	"Each endpoint's approximate-index capacity in the router's blocks (its engine's GPU plus CPU-offload tokens over the router's block size), by source: engine (the engine's vllm:cache_config_info), engine+config_cpu (the engine's GPU blocks and the configured cpuBlocks), config (configured for the endpoint), default (the configured or built-in capacity for all endpoints).",
	[]string{"endpoint", "source"}, nil)

func (c *modeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- modeDesc; ch <- capacityDesc }

func (c *modeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.x.Endpoints() {
		for _, m := range Modes() {
			v := 0.0
			if m == e.Mode {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(modeDesc, prometheus.GaugeValue, v, e.ID, m.String())
		}
		if c.x.cfg.Enabled {
			ch <- prometheus.MustNewConstMetric(capacityDesc, prometheus.GaugeValue, float64(e.Capacity), e.ID, e.CapacitySource)
		}
	}
}
