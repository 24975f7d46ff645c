package tokenload

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

func TestTrackerGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr, err := NewTracker(Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)

	a := tr.Dispatch("10.0.0.1:8000", 6000)
	tr.Dispatch("10.0.0.1:8000", 2000)
	tr.Dispatch("10.0.0.2:8000", 500)
	a.FirstChunk()

	const header = `
# HELP llm_d_epp_inflight_requests In-flight requests per endpoint: dispatched and not yet done.
# TYPE llm_d_epp_inflight_requests gauge
`
	const tokensHeader = `
# HELP llm_d_epp_inflight_tokens Committed in-flight tokens per endpoint: uncached prompt tokens of requests that have not streamed a first chunk.
# TYPE llm_d_epp_inflight_tokens gauge
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(header+`
llm_d_epp_inflight_requests{endpoint_name="10.0.0.1:8000"} 2
llm_d_epp_inflight_requests{endpoint_name="10.0.0.2:8000"} 1
`+tokensHeader+`
llm_d_epp_inflight_tokens{endpoint_name="10.0.0.1:8000"} 2000
llm_d_epp_inflight_tokens{endpoint_name="10.0.0.2:8000"} 500
`), InflightRequestsMetric, InflightTokensMetric))

	// A removed endpoint's series disappear.
	tr.Remove("10.0.0.1:8000")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(header+`
llm_d_epp_inflight_requests{endpoint_name="10.0.0.2:8000"} 1
`+tokensHeader+`
llm_d_epp_inflight_tokens{endpoint_name="10.0.0.2:8000"} 500
`), InflightRequestsMetric, InflightTokensMetric))
	require.Equal(t, 2, testutil.CollectAndCount(newCollector(tr)))
}

func TestTrackerGaugesInvalidEndpointNameDoesNotPanic(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr, err := NewTracker(Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	tr.Dispatch("bad\xff", 1)
	_, err = reg.Gather()
	require.Error(t, err)
	tr.Remove("bad\xff")
	_, err = reg.Gather()
	require.NoError(t, err, "the tracker keeps serving")
}

func TestTrackerRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := NewTracker(Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	_, err = NewTracker(Options{Set: telemetry.Set{Registerer: reg}})
	require.Error(t, err, "two trackers cannot export the same series")

	tr, err := NewTracker(Options{})
	require.NoError(t, err)
	tr.Dispatch("x", 1).Done()
}
