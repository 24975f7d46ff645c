package kvevents

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/labelselector"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// Options.Matcher decides which endpoints are subscribed; an endpoint relabelled out of it is unsubscribed.
func TestPoolMatcherDecidesSubscriptions(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	canary := func(l map[string]string) bool { return l["track"] != "canary" }
	p, err := NewPool(PoolConfig{Replay: false}, ix, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry()}, Matcher: canary})
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: "127.0.0.1:1", EventsAddress: "tcp://127.0.0.1:1", Labels: map[string]string{"track": "stable"}}))
	require.NoError(t, p.Ensure(Endpoint{ID: "127.0.0.1:2", EventsAddress: "tcp://127.0.0.1:2", Labels: map[string]string{"track": "canary"}}))
	require.Equal(t, []string{"127.0.0.1:1"}, p.Endpoints())
	require.NoError(t, p.Ensure(Endpoint{ID: "127.0.0.1:1", EventsAddress: "tcp://127.0.0.1:1", Labels: map[string]string{"track": "canary"}}))
	require.Empty(t, p.Endpoints(), "relabelled out of the matcher: unsubscribed")
	require.NoError(t, p.Close())
}

// newSelectingPool is newTestPool with the matcher of the label selector
// text, as a Router builds it from its events.selector.
func newSelectingPool(t testing.TB, cfg PoolConfig, ix *kvindex.Index, selector string) (*Pool, *logBuffer) {
	t.Helper()
	sel, err := labelselector.Parse(selector)
	require.NoError(t, err)
	logs := &logBuffer{}
	p, err := NewPool(cfg, ix, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Logger: logs.logger()}, Matcher: sel.Matches})
	require.NoError(t, err)
	return p, logs
}

// kvroute_kv_events_endpoints_not_selected counts the endpoints the pool
// was given and the matcher refused, as labels change, endpoints leave and
// the pool closes, so that with active_subscribers it accounts for every
// endpoint of the pool (the subscribers-mismatch alert adds the two).
func TestPoolCountsEndpointsNotSelected(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	reg := prometheus.NewRegistry()
	notDecode := func(l map[string]string) bool { return l["role"] != "decode" }
	p, err := NewPool(PoolConfig{Replay: false}, ix, Options{Set: telemetry.Set{Registerer: reg}, Matcher: notDecode})
	require.NoError(t, err)
	defer p.Close()
	gauge := func() float64 {
		t.Helper()
		v, err := gatherGauge(reg, "kvroute_kv_events_endpoints_not_selected")
		require.NoError(t, err)
		return v
	}
	ep := func(port, role string) Endpoint {
		return Endpoint{ID: "127.0.0.1:" + port, EventsAddress: "tcp://127.0.0.1:" + port, Labels: map[string]string{"role": role}}
	}
	require.NoError(t, p.Ensure(ep("1", "prefill")))
	require.NoError(t, p.Ensure(ep("2", "decode")))
	require.NoError(t, p.Ensure(ep("3", "decode")))
	require.NoError(t, p.Ensure(ep("3", "decode")), "idempotent")
	require.Equal(t, 2.0, gauge())
	require.NoError(t, p.Ensure(ep("2", "both")))
	require.Equal(t, 1.0, gauge(), "relabelled into the selector")
	require.NoError(t, p.Ensure(ep("1", "decode")))
	require.Equal(t, 2.0, gauge(), "relabelled out of it")
	p.Remove("127.0.0.1:3")
	p.Remove("127.0.0.1:3")
	require.Equal(t, 1.0, gauge(), "gone from the pool")
	require.NoError(t, p.Close())
	require.Zero(t, gauge(), "closed")
}

// gatherGauge reads an unlabelled gauge from reg (0 when absent).
func gatherGauge(reg *prometheus.Registry, name string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue(), nil
		}
	}
	return 0, nil
}
