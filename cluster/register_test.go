package cluster

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/internal/regtest"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// TestCloseUnregisters checks the registration policy: New registers the
// replica's metrics, Close unregisters them, and a replica built again on
// the same registry registers without error.
func TestCloseUnregisters(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	defer ix.Close()
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
	}{
		{"shared decisions", func(*Config) {}},
		{"load only", func(c *Config) { c.DisableSharedDecisions = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			regtest.CloseUnregisters(t, func(reg *prometheus.Registry) func() {
				tr, err := tokenload.NewTracker(tokenload.Options{})
				require.NoError(t, err)
				cfg := Config{Addrs: []string{srv.Addr}, Pool: "reg", ReplicaID: "a", Lease: time.Hour,
					RefreshPeriod: time.Minute, ReadPeriod: time.Hour, OpTimeout: 5 * time.Second}
				tc.mutate(&cfg)
				r, err := New(cfg, ix, tr, Options{Set: telemetry.Set{Registerer: reg}})
				require.NoError(t, err)
				return r.Close
			})
		})
	}
}
