package enginemetrics

import (
	"testing"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestCloseUnregistersMetrics checks the registration policy: Close
// unregisters what New registered, so a second Scraper can be built on the
// same registry.
func TestCloseUnregistersMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	opts := Options{Set: telemetry.Set{Registerer: reg, Clock: telemetry.NewManual(t0)}}
	s, err := New(manualConfig(), opts)
	require.NoError(t, err)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.NotEmpty(t, mfs)
	s.Close()
	mfs, err = reg.Gather()
	require.NoError(t, err)
	require.Empty(t, mfs, "Close leaves no family registered")

	s, err = New(manualConfig(), opts)
	require.NoError(t, err, "a closed Scraper can be built again on the same registry")
	s.Close()
}
