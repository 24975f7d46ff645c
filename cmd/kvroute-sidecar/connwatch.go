package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/connwatch"
)

// newConnWatcher returns the Watcher of the sidecar's connections, its
// clients' and its metrics port's (package connwatch): what net/http does
// to them silently, before a handler sees a request, counted as the
// gateway counts its own.
func newConnWatcher() *connwatch.Watcher {
	return connwatch.New(prometheus.CounterOpts{
		Name: "kvroute_sidecar_header_timeouts_total",
		Help: "Connections (clients' or the metrics port's) the sidecar closed because a request header did not arrive within its read-header timeout (10s).",
	}, prometheus.CounterOpts{
		Name: "kvroute_sidecar_server_refused_requests_total",
		Help: "Requests the sidecar's HTTP servers (clients' and the metrics port's) refused before its handler saw them: a malformed request line or header, a header over the size limit, an unsupported HTTP version.",
	})
}
