package accuracy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// A request in flight when its endpoint leaves the set ends afterwards: it
// is counted as late and recreates neither the endpoint's window nor its
// series, while the endpoints still in the set are observed as before.
func TestLateEndOnRemovedEndpointLeavesNothing(t *testing.T) {
	const other = "10.0.0.2:8000"
	l, reg, _ := newLoop(t, Config{Window: 1}, nil)
	l.SetEndpoints([]string{ep, other})
	p := Prediction{Endpoint: ep, PromptTokens: 128, CachedTokens: 64}
	observe(l, p, 0)
	require.True(t, l.Inaccurate(ep))

	l.Begin() // in flight on ep when it leaves
	l.SetEndpoints([]string{other})
	require.False(t, l.Inaccurate(ep))
	_, present := series(t, reg, "kvroute_router_prediction_observed_total", ep)
	require.False(t, present, "the removed endpoint's series are deleted")
	_, ok := l.End(p, 0, true)
	require.False(t, ok, "a late end is not observed")
	require.Zero(t, l.Pending())
	for _, name := range []string{"kvroute_router_prediction_observed_total", "kvroute_router_endpoint_inaccurate",
		"kvroute_router_prediction_stale_total"} {
		_, present = series(t, reg, name, ep)
		require.False(t, present, "%s: a late end recreates no series", name)
	}
	require.False(t, l.Inaccurate(ep))
	l.mu.Lock()
	require.Empty(t, l.eps, "a late end recreates no window")
	l.mu.Unlock()
	require.Equal(t, 1.0, testutil.ToFloat64(l.met.late))

	observe(l, Prediction{Endpoint: other, PromptTokens: 128, CachedTokens: 0}, 0)
	require.Equal(t, 1.0, value(t, reg, "kvroute_router_prediction_observed_total", other))
	require.Equal(t, 1.0, testutil.ToFloat64(l.met.late))
}

// An endpoint that leaves while its resync is being asked for gets no
// resync series afterwards.
func TestResyncOfEndpointLeavingMeanwhileLeavesNoSeries(t *testing.T) {
	var l *Loop
	l, reg, _ := newLoop(t, Config{Window: 1, Resync: true}, func(string) error {
		l.SetEndpoints(nil)
		return nil
	})
	l.SetEndpoints([]string{ep})
	observe(l, Prediction{Endpoint: ep, PromptTokens: 128, CachedTokens: 64}, 0)
	require.Zero(t, testutil.CollectAndCount(reg, "kvroute_router_accuracy_resyncs_total"))
	_, present := series(t, reg, "kvroute_router_endpoint_inaccurate", ep)
	require.False(t, present)
}

// An engine's answer that cannot be a count of cached tokens (a negative
// one, from a faulty or hostile engine) is not observed as "the engine
// reused nothing", which would count a stale miss and could mark the
// endpoint inaccurate and resync it: it is only counted
// (kvroute_router_prediction_invalid_total), and the endpoint's window and
// series stay as they were.
func TestNegativeCachedTokensAreRefusedAndCounted(t *testing.T) {
	l, reg, _ := newLoop(t, Config{Window: 1}, nil)
	l.SetEndpoints([]string{ep})
	p := Prediction{Endpoint: ep, PromptTokens: 128, CachedTokens: 64}
	l.Begin()
	_, ok := l.End(p, -64, true)
	require.False(t, ok, "a negative cached count is not observed")
	require.Zero(t, l.Pending())
	require.False(t, l.Inaccurate(ep), "a refused answer counts no miss")
	for _, name := range []string{"kvroute_router_prediction_observed_total", "kvroute_router_prediction_stale_total",
		"kvroute_router_endpoint_inaccurate"} {
		_, present := series(t, reg, name, ep)
		require.False(t, present, "%s: a refused answer creates no series", name)
	}
	require.Equal(t, 1.0, unlabelled(t, reg, "kvroute_router_prediction_invalid_total"))

	o := observe(l, p, 64)
	require.Zero(t, o.Error)
	require.Equal(t, 1.0, value(t, reg, "kvroute_router_prediction_observed_total", ep))
	require.Equal(t, 1.0, unlabelled(t, reg, "kvroute_router_prediction_invalid_total"))
}

// An engine's answer of more cached tokens than the prompt has (a faulty
// or hostile engine: no engine serves more of a prompt from its cache than
// the prompt holds) is refused like a negative one: observed, it would
// add an absurd count to the endpoint's cached-token total for good and
// count a miss the engine never had.
func TestCachedTokensBeyondThePromptAreRefusedAndCounted(t *testing.T) {
	l, reg, _ := newLoop(t, Config{Window: 1}, nil)
	l.SetEndpoints([]string{ep})
	p := Prediction{Endpoint: ep, PromptTokens: 128, CachedTokens: 64}
	l.Begin()
	_, ok := l.End(p, 1<<40, true)
	require.False(t, ok, "more cached tokens than the prompt holds are not observed")
	require.Zero(t, l.Pending())
	require.False(t, l.Inaccurate(ep), "a refused answer counts no miss")
	for _, name := range []string{"kvroute_router_prediction_observed_total", "kvroute_router_observed_cached_tokens_total",
		"kvroute_router_prediction_missing_total", "kvroute_router_endpoint_inaccurate"} {
		_, present := series(t, reg, name, ep)
		require.False(t, present, "%s: a refused answer creates no series", name)
	}
	require.Equal(t, 1.0, unlabelled(t, reg, "kvroute_router_prediction_invalid_total"))

	o := observe(l, p, 128)
	require.Equal(t, -64, o.Error, "the whole prompt is a count of tokens the engine may report")
	require.Equal(t, 1.0, unlabelled(t, reg, "kvroute_router_prediction_invalid_total"))
}

// unlabelled returns the value of the counter name, which has no labels (0
// when it is not gathered).
func unlabelled(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
