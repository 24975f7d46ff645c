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
	recorded prometheus.Counter
	evicted  [numReasons]prometheus.Counter
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
	m := &metrics{recorded: recorded}
	for i, n := range reasonNames {
		m.evicted[i] = evicted.WithLabelValues(n)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{recorded, evicted, entries, bytes, &modeCollector{x: x}} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// modeCollector exports kvroute_approx_endpoint_mode{endpoint, mode}: 1 for
// each known endpoint's current mode, 0 for the others.
type modeCollector struct{ x *Index }

var modeDesc = prometheus.NewDesc("kvroute_approx_endpoint_mode",
	"Each endpoint's cache mode (1 for the current one): precise (KV events live), approximate (the router's own decisions), blind (no cache information).",
	[]string{"endpoint", "mode"}, nil)

func (c *modeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- modeDesc }

func (c *modeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.x.Endpoints() {
		for _, m := range Modes() {
			v := 0.0
			if m == e.Mode {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(modeDesc, prometheus.GaugeValue, v, e.ID, m.String())
		}
	}
}
