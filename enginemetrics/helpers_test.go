package enginemetrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// manualConfig scrapes only when a test adds an endpoint or advances the
// clock by an hour, and keeps signals fresh for two hours.
func manualConfig() Config {
	return Config{Interval: time.Hour, Staleness: 2 * time.Hour, Timeout: 10 * time.Second, WaitingThreshold: 2}
}

// newScraper starts a Scraper on a manual clock with a private registry and
// closes it at the end of the test.
func newScraper(t *testing.T, cfg Config) (*Scraper, *telemetry.Manual, *prometheus.Registry) {
	t.Helper()
	clk := telemetry.NewManual(t0)
	reg := prometheus.NewRegistry()
	s, err := New(cfg, Options{Set: telemetry.Set{Registerer: reg, Clock: clk}})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s, clk, reg
}

// endpointOf names an httptest server as an endpoint.
func endpointOf(srv *httptest.Server) kvroute.Endpoint {
	return kvroute.Endpoint{ID: strings.TrimPrefix(srv.URL, "http://")}
}

// scrapes is how many scrapes of ep completed.
func scrapes(s *Scraper, ep kvroute.Endpoint) float64 {
	t := (*s.targets.Load())[ep.ID]
	if t == nil {
		return 0
	}
	return testutil.ToFloat64(t.m.scrapes)
}

// failures is how many scrapes of ep failed for reason.
func failures(s *Scraper, ep kvroute.Endpoint, reason string) float64 {
	return testutil.ToFloat64(s.m.failures.WithLabelValues(ep.ID, reason))
}

// waitScrapes waits until at least n scrapes of ep completed.
func waitScrapes(t *testing.T, s *Scraper, ep kvroute.Endpoint, n float64) {
	t.Helper()
	require.Eventually(t, func() bool { return scrapes(s, ep) >= n }, 20*time.Second, time.Millisecond,
		"endpoint %s: %v scrapes, want %v", ep.ID, scrapes(s, ep), n)
}

// scrapeAgain advances the clock by one interval and waits for the scrape of
// ep that the tick starts.
func scrapeAgain(t *testing.T, s *Scraper, clk *telemetry.Manual, ep kvroute.Endpoint) {
	t.Helper()
	// A tick that finds ep's last scrape still in flight (counted, not yet
	// marked done) skips it, and no further tick would come: wait until
	// that scrape has ended before moving the clock.
	tg := (*s.targets.Load())[ep.ID]
	require.NotNil(t, tg, "endpoint %s is not a target", ep.ID)
	require.Eventually(t, func() bool { return !tg.inflight.Load() }, 20*time.Second, time.Millisecond,
		"endpoint %s: the last scrape never ended", ep.ID)
	n := scrapes(s, ep)
	clk.Advance(s.cfg.Interval)
	waitScrapes(t, s, ep, n+1)
}

// metricsPage is a vLLM-shaped /metrics page with the given gauges.
func metricsPage(waiting, running int, kv float64) string {
	return fmt.Sprintf("# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} %d\n"+
		"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} %d\n"+
		"# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} %g\n", waiting, running, kv)
}

// serve starts an HTTP server answering /metrics with h.
func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// page serves a fixed body.
func page(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(body))
	}
}
