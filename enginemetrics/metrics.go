package enginemetrics

import "github.com/prometheus/client_golang/prometheus"

// metrics are the Scraper's own metrics. The endpoint label is the
// endpoint's ID as configured, never a value read from a response; an
// endpoint's series are deleted when it leaves.
type metrics struct {
	scrapes   *prometheus.CounterVec
	failures  *prometheus.CounterVec
	endpoints prometheus.Gauge
	loraDrops *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		scrapes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_engine_metrics_scrapes_total",
			Help: "Scrapes of model servers' Prometheus metrics completed, successful or not, by endpoint.",
		}, []string{"endpoint"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_engine_metrics_scrape_failures_total",
			Help: "Failed scrapes of model servers' metrics by endpoint and reason (connection, timeout, http_status, " +
				"too_large, parse, missing_metric, bad_value); the endpoint's signal is unknown until a scrape succeeds.",
		}, []string{"endpoint", "reason"}),
		endpoints: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kvroute_engine_metrics_endpoints",
			Help: "Endpoints whose model-server metrics are scraped.",
		}),
		loraDrops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_engine_metrics_lora_dropped_total",
			Help: "Adapter names (or max_lora labels) of vllm:lora_requests_info dropped by endpoint and reason " +
				"(invalid_name, too_many, bad_max_lora), or the whole gauge (bad_gauge: not a gauge, or no finite series; read as no adapters); the rest of the scrape is kept.",
		}, []string{"endpoint", "reason"}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.scrapes, m.failures, m.endpoints, m.loraDrops}
}

// targetMetrics are one endpoint's series, resolved once so a scrape does
// not look them up.
type targetMetrics struct {
	scrapes   prometheus.Counter
	failures  map[string]prometheus.Counter
	loraDrops [len(loraDrops{})]prometheus.Counter // by loraDropReasons' order
}

func (m *metrics) forEndpoint(id string) targetMetrics {
	tm := targetMetrics{scrapes: m.scrapes.WithLabelValues(id), failures: make(map[string]prometheus.Counter, len(reasons))}
	for _, r := range reasons {
		tm.failures[r] = m.failures.WithLabelValues(id, r)
	}
	for i, r := range loraDropReasons {
		tm.loraDrops[i] = m.loraDrops.WithLabelValues(id, r)
	}
	return tm
}

func (m *metrics) drop(id string) {
	m.scrapes.DeleteLabelValues(id)
	m.failures.DeletePartialMatch(prometheus.Labels{"endpoint": id})
	m.loraDrops.DeletePartialMatch(prometheus.Labels{"endpoint": id})
}
