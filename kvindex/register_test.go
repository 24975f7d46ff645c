package kvindex

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/regtest"
	"github.com/kvroute/kvroute/telemetry"
)

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
			regtest.CloseUnregisters(t, func(reg *prometheus.Registry) func() {
				ix, err := New(tc.cfg, Options{Set: telemetry.Set{Registerer: reg}})
				require.NoError(t, err)
				return ix.Close
			})
		})
	}
}
