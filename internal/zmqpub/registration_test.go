package zmqpub

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/regtest"
	"github.com/kvroute/kvroute/telemetry"
)

// TestCloseUnregistersMetrics checks the registration policy, with the
// replay server's metrics too: Close unregisters what New registered, so a
// second publisher can be built on the same registry.
func TestCloseUnregistersMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg := Config{Topic: "kv@a@m", Addr: "127.0.0.1:0", ReplayAddr: "127.0.0.1:0"}
	regtest.CloseUnregisters(t, func(reg *prometheus.Registry) func() {
		p, err := New(cfg, Options{Set: telemetry.Set{Registerer: reg}})
		require.NoError(t, err)
		return func() { require.NoError(t, p.Close()) }
	})
}
