package accuracy

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
// loop's metrics, Close unregisters them, and a Loop built again on the same
// registry registers without error.
func TestCloseUnregisters(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"defaults", Config{}},
		{"resync", Config{Resync: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			opts := Options{Set: telemetry.Set{Registerer: reg}}
			for range 2 {
				l, err := New(tc.cfg, 16, opts)
				require.NoError(t, err)
				l.Begin()
				l.End(Prediction{Endpoint: "10.0.0.1:8000", PromptTokens: 64, CachedTokens: 32}, 16, true)
				require.NotZero(t, gatheredFamilies(t, reg), "metrics not registered")
				l.Close()
				require.Zero(t, gatheredFamilies(t, reg), "metrics left after Close")
				l.Close() // idempotent
			}
			l, err := New(tc.cfg, 16, Options{})
			require.NoError(t, err)
			l.Close() // without a registerer Close has nothing to do
		})
	}
}
