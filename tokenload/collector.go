package tokenload

import "github.com/prometheus/client_golang/prometheus"

// Gauge names, the same as the llm-d router's so that dashboards and alerts
// carry over.
const (
	InflightTokensMetric   = "llm_d_epp_inflight_tokens"
	InflightRequestsMetric = "llm_d_epp_inflight_requests"
)

// collector exports a Tracker's counters at scrape time, so the request path
// never touches a prometheus gauge and removed endpoints simply stop being
// reported.
type collector struct {
	t        *Tracker
	tokens   *prometheus.Desc
	requests *prometheus.Desc
}

func newCollector(t *Tracker) *collector {
	return &collector{
		t: t,
		tokens: prometheus.NewDesc(InflightTokensMetric,
			"Committed in-flight tokens per endpoint: uncached prompt tokens of requests that have not streamed a first chunk.",
			[]string{"endpoint_name"}, nil),
		requests: prometheus.NewDesc(InflightRequestsMetric,
			"In-flight requests per endpoint: dispatched and not yet done.",
			[]string{"endpoint_name"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tokens
	ch <- c.requests
}

// Collect implements prometheus.Collector. An endpoint ID that is not a valid
// label value (invalid UTF-8) is reported as an invalid metric, which fails
// that scrape's gather with an error instead of panicking.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.t.Range(func(endpoint string, tokens, requests int64) bool {
		ch <- constGauge(c.tokens, float64(tokens), endpoint)
		ch <- constGauge(c.requests, float64(requests), endpoint)
		return true
	})
}

func constGauge(d *prometheus.Desc, v float64, endpoint string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, endpoint)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}
