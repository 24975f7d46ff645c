package tokenload

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/regtest"
	"github.com/kvroute/kvroute/telemetry"
)

// TestCloseUnregisters checks the registration policy for each component:
// New registers its metrics, Close unregisters them, and the component built
// again on the same registry registers without error.
func TestCloseUnregisters(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(t *testing.T, opts Options) (close func())
	}{
		{"Tracker", func(t *testing.T, opts Options) func() {
			tr, err := NewTracker(opts)
			require.NoError(t, err)
			tr.Dispatch("10.0.0.1:8000", 10) // the gauges have a series
			return tr.Close
		}},
		{"RequestTable", func(t *testing.T, opts Options) func() {
			rt, err := NewRequestTable(RequestTableConfig{}, opts)
			require.NoError(t, err)
			return rt.Close
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			regtest.CloseUnregisters(t, func(reg *prometheus.Registry) func() {
				return tc.build(t, Options{Set: telemetry.Set{Registerer: reg}})
			})
			tc.build(t, Options{})() // without a registerer Close has nothing to do
		})
	}
}
