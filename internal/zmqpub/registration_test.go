package zmqpub

import (
	"testing"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestCloseUnregistersMetrics checks the registration policy, with the
// replay server's metrics too: Close unregisters what New registered, so a
// second publisher can be built on the same registry.
func TestCloseUnregistersMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	cfg := Config{Topic: "kv@a@m", Addr: "127.0.0.1:0", ReplayAddr: "127.0.0.1:0"}
	opts := Options{Set: telemetry.Set{Registerer: reg}}
	p, err := New(cfg, opts)
	require.NoError(t, err)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.NotEmpty(t, mfs)
	require.NoError(t, p.Close())
	mfs, err = reg.Gather()
	require.NoError(t, err)
	require.Empty(t, mfs, "Close leaves no family registered")

	p, err = New(cfg, opts)
	require.NoError(t, err, "a closed publisher can be built again on the same registry")
	require.NoError(t, p.Close())
}
