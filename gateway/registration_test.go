package gateway

import (
	"testing"

	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestCloseUnregistersMetrics checks the registration policy: Close
// unregisters what New registered, so a second Handler can be built on the
// same registry.
func TestCloseUnregistersMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := Options{Set: telemetry.Set{Registerer: reg}}
	h, err := New(Config{}, new(RoundRobin), opts)
	require.NoError(t, err)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.NotEmpty(t, mfs)
	h.Close()
	mfs, err = reg.Gather()
	require.NoError(t, err)
	require.Empty(t, mfs, "Close leaves no family registered")
	h.Close() // idempotent

	h, err = New(Config{}, new(RoundRobin), opts)
	require.NoError(t, err, "a closed Handler can be built again on the same registry")
	h.Close()
}
