package kvevents

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// Options.Matcher decides which endpoints are subscribed, in place of the
// built-in selector; an endpoint relabelled out of it is unsubscribed.
func TestPoolMatcherDecidesSubscriptions(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	canary := func(l map[string]string) bool { return l["track"] != "canary" }
	p, err := NewPool(PoolConfig{Replay: false}, ix, Options{Registerer: prometheus.NewRegistry(), Matcher: canary})
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: "127.0.0.1:1", EventsAddress: "tcp://127.0.0.1:1", Labels: map[string]string{"track": "stable"}}))
	require.NoError(t, p.Ensure(Endpoint{ID: "127.0.0.1:2", EventsAddress: "tcp://127.0.0.1:2", Labels: map[string]string{"track": "canary"}}))
	require.Equal(t, []string{"127.0.0.1:1"}, p.Endpoints())
	require.NoError(t, p.Ensure(Endpoint{ID: "127.0.0.1:1", EventsAddress: "tcp://127.0.0.1:1", Labels: map[string]string{"track": "canary"}}))
	require.Empty(t, p.Endpoints(), "relabelled out of the matcher: unsubscribed")
	require.NoError(t, p.Close())

	_, err = NewPool(PoolConfig{Selector: "a=b"}, ix, Options{Matcher: canary})
	require.Error(t, err, "a selector and a matcher together are ambiguous")
}
