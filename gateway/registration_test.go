package gateway

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/regtest"
	"github.com/kvroute/kvroute/telemetry"
)

// TestCloseUnregistersMetrics checks the registration policy: Close
// unregisters what New registered, so a second Handler can be built on the
// same registry.
func TestCloseUnregistersMetrics(t *testing.T) {
	regtest.CloseUnregisters(t, func(reg *prometheus.Registry) func() {
		h, err := New(Config{}, new(RoundRobin), Options{Set: telemetry.Set{Registerer: reg}})
		require.NoError(t, err)
		return h.Close
	})
}
