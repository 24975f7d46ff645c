package models

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/regtest"
)

// TestRegistryCloseUnregistersMetrics checks the registration policy: a
// Registry's Close unregisters every collector New registered (the rewrite
// counters, the label drops gauge and the poller's metrics), so that no
// series of a closed Registry (an endpoint it polled, a rewrite of its
// table) stays on the registry, and a Registry built again there starts
// from its own.
func TestRegistryCloseUnregistersMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newEngine(t, "llama")
	defer e.srv.Close()
	regtest.CloseUnregisters(t, func(reg *prometheus.Registry) func() {
		r, err := New(Config{
			Poll:     PollConfig{Enabled: true, Interval: time.Hour},
			Rewrites: []Rule{{Model: "chat", Targets: []Target{{Model: "llama"}}}},
		}, Options{Set: setWith(reg)})
		require.NoError(t, err)
		ep := e.endpoint()
		ep.Labels = map[string]string{DefaultLabel: "llama,llama"}
		r.Annotate([]kvroute.Endpoint{ep})
		r.SetEndpoints([]kvroute.Endpoint{ep})
		r.Poller().PollOnce(context.Background())
		return r.Close
	})
}

// A Poller built alone unregisters its metrics on Close too.
func TestPollerCloseUnregistersMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	e := newEngine(t, "llama")
	defer e.srv.Close()
	regtest.CloseUnregisters(t, func(reg *prometheus.Registry) func() {
		p := newTestPoller(t, reg, nil)
		p.SetEndpoints([]kvroute.Endpoint{e.endpoint()})
		p.PollOnce(context.Background())
		return p.Close
	})
}
