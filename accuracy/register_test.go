package accuracy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/regtest"
	"github.com/kvroute/kvroute/telemetry"
)

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
			regtest.CloseUnregisters(t, func(reg *prometheus.Registry) func() {
				l, err := New(tc.cfg, 16, Options{Set: telemetry.Set{Registerer: reg}})
				require.NoError(t, err)
				l.Begin()
				l.End(Prediction{Endpoint: "10.0.0.1:8000", PromptTokens: 64, CachedTokens: 32}, 16, true)
				return l.Close
			})
			l, err := New(tc.cfg, 16, Options{})
			require.NoError(t, err)
			l.Close() // without a registerer Close has nothing to do
		})
	}
}
