package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/connwatch"
)

// newMetricsWatcher returns the Watcher of the metrics port's connections
// (package connwatch): a scraper's or prober's connection closed because
// its request header (over TLS, its handshake too) did not arrive within
// gateway.DefaultReadHeaderTimeout, and a request net/http refused unread,
// which net/http both does silently; counted as the kvroute gateway and
// the sidecar count theirs.
func newMetricsWatcher() *connwatch.Watcher {
	return connwatch.New(prometheus.CounterOpts{
		Name: "kvroute_epp_metrics_header_timeouts_total",
		Help: "Connections to the metrics port closed because a request header (over TLS, or the handshake) did not arrive within 10s.",
	}, prometheus.CounterOpts{
		Name: "kvroute_epp_metrics_refused_requests_total",
		Help: "Requests the metrics port's HTTP server refused before serving them: a malformed request line or header, a header over the size limit, an unsupported HTTP version, plain HTTP sent to its TLS port.",
	})
}
