package models

import (
	"net/http"

	"github.com/kvroute/kvroute/telemetry"
)

// Options are the package's injected dependencies; the zero value is valid.
type Options struct {
	// Set: Registerer receives the metrics (nil registers nothing), Logger
	// the logs (nil discards), Clock times the poller (nil is the wall
	// clock).
	telemetry.Set
	// Random returns uniform values in [0, 1) for the rewrite table's
	// weighted draw; nil uses math/rand/v2. It must be safe for concurrent
	// use; a seeded source makes a split reproducible.
	Random func() float64
	// Client calls the engines' /v1/models; nil uses a client without
	// redirects and with PollConfig.Timeout per call.
	Client *http.Client
	// OnChange is called, on the poller's goroutine, after a poll changed
	// the models of some endpoint, so that the caller re-annotates its
	// endpoints (Registry.Annotate) and hands them to the router again.
	OnChange func()
}
