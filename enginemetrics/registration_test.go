package enginemetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/regtest"
	"github.com/kvroute/kvroute/telemetry"
)

// TestCloseUnregistersMetrics checks the registration policy: Close
// unregisters what New registered, so a second Scraper can be built on the
// same registry.
func TestCloseUnregistersMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	regtest.CloseUnregisters(t, func(reg *prometheus.Registry) func() {
		s, err := New(manualConfig(), Options{Set: telemetry.Set{Registerer: reg, Clock: telemetry.NewManual(t0)}})
		require.NoError(t, err)
		return s.Close
	})
}
