package kvindex

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// gatheredFamilies returns how many metric families reg gathers.
func gatheredFamilies(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	return len(mfs)
}

// TestCloseUnregisters checks the registration policy: New registers the
// index's metrics, Close unregisters them, and an index built again on the
// same registry registers without error.
func TestCloseUnregisters(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"with sweeper", Config{}},
		{"without sweeper", Config{SweepInterval: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			opts := Options{Set: telemetry.Set{Registerer: reg}}
			for range 2 {
				ix, err := New(tc.cfg, opts)
				require.NoError(t, err)
				require.NotZero(t, gatheredFamilies(t, reg), "metrics not registered")
				ix.Close()
				require.Zero(t, gatheredFamilies(t, reg), "metrics left after Close")
				ix.Close() // idempotent
			}
		})
	}
}
