package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/connwatch"
)

// The defaults of the Server's client connection timeouts.
const (
	// DefaultReadHeaderTimeout is the default of
	// ServerConfig.ReadHeaderTimeout.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout is the default of ServerConfig.IdleTimeout.
	DefaultIdleTimeout = 2 * time.Minute
)

// newHeaderTimeouts returns the Watcher of the gateway's client connections
// (package connwatch): the connections net/http closes because a request
// header did not arrive within ServerConfig.ReadHeaderTimeout, and the
// requests net/http refuses itself before any handler sees them (a
// malformed request line or header, a header over the size limit, an
// unsupported HTTP version), both of which it does silently.
func newHeaderTimeouts() *connwatch.Watcher {
	return connwatch.New(prometheus.CounterOpts{
		Name: "kvroute_gateway_header_timeouts_total",
		Help: "Client connections closed because a request header did not arrive within the gateway's readHeaderTimeout.",
	}, prometheus.CounterOpts{
		Name: "kvroute_gateway_refused_requests_total",
		Help: "Requests the gateway's HTTP server refused before routing them: a malformed request line or header, a header over the size limit, an unsupported HTTP version.",
	})
}
