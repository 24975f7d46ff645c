package kvevents

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// The cache_kind label of the skipped-stores counter comes from a closed
// set: vLLM's cache kinds as they are, "none" without one, and "other" for
// any other string, so a publisher sending made-up kinds (each a new
// string off the wire) adds no series.
func TestSkippedStoresCacheKindLabelIsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newApplyMetrics(&registrar{set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	for i := range 500 {
		m.skip(fmt.Sprintf("made-up-%d", i), skipNoWindow, 1)
	}
	m.skip("sliding_window", skipNoWindow, 1)
	m.skip("", skipNoWindow, 1)
	require.Equal(t, 3, testutil.CollectAndCount(m.StoresSkipped))
	require.Equal(t, 500.0, testutil.ToFloat64(m.StoresSkipped.WithLabelValues("other", string(skipNoWindow))))
	require.Equal(t, 1.0, testutil.ToFloat64(m.StoresSkipped.WithLabelValues("sliding_window", string(skipNoWindow))))
	require.Equal(t, 1.0, testutil.ToFloat64(m.StoresSkipped.WithLabelValues("none", string(skipNoWindow))))
	for k := range cacheKindLabels {
		require.Equal(t, k, cacheKindLabel(k))
	}
}
