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
