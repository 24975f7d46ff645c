package models

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// An endpoint that keeps its ID at a new address (a pod replaced behind a
// stable name) is a new engine: the answer of its old address is dropped at
// once, with the gauges that describe it, and the new address is polled at
// once, as a new endpoint's is, not an interval later.
func TestPollerPollsAgainAtOnceWhenAnEndpointsAddressChanges(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	changed := make(chan struct{}, 4)
	p := newTestPoller(t, reg, func() { changed <- struct{}{} })
	defer p.Close()
	before := newEngine(t, "old-model")
	defer before.srv.Close()
	after := newEngine(t, "new-model")
	defer after.srv.Close()
	awaitChange := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(time.Minute): // a bound only: the kick polls at once
			t.Fatal(what)
		}
	}

	// The new address answers once the test has looked at what the
	// poller holds meanwhile.
	release := make(chan struct{})
	inner := after.srv.Config.Handler
	after.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			inner.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	})

	const id = "pod-0"
	p.SetEndpoints([]kvroute.Endpoint{{ID: id, Address: before.srv.URL}})
	awaitChange("the new endpoint was not polled")
	ms, ok := p.Models(id)
	require.True(t, ok)
	require.Equal(t, []string{"old-model"}, ms)

	p.SetEndpoints([]kvroute.Endpoint{{ID: id, Address: after.srv.URL}})
	_, ok = p.Models(id)
	require.False(t, ok, "the old address's answer is dropped with the address")
	require.Equal(t, 0, testutil.CollectAndCount(p.met.served), "kvroute_models_served described the old address")
	close(release)
	awaitChange("the endpoint was not polled again at its new address")
	ms, ok = p.Models(id)
	require.True(t, ok)
	require.Equal(t, []string{"new-model"}, ms)
	require.InDelta(t, 1, testutil.ToFloat64(p.met.served.WithLabelValues(id)), 0)

	p.SetEndpoints([]kvroute.Endpoint{{ID: id, Address: after.srv.URL + "/"}})
	ms, ok = p.Models(id)
	require.True(t, ok, "the same base URL is no new address")
	require.Equal(t, []string{"new-model"}, ms)
}

// An answer of the old address that arrives after the address changed
// (SetEndpoints during the call) is not kept for the new one.
func TestPollerDropsAnAnswerOfAnAddressReplacedMidPoll(t *testing.T) {
	defer leakcheck.Check(t)()
	p := newTestPoller(t, nil, nil)
	defer p.Close()
	stopPolling(p) // the test polls alone
	before := newEngine(t, "old-model")
	defer before.srv.Close()
	after := newEngine(t, "new-model")
	defer after.srv.Close()
	const id = "pod-0"
	inner := before.srv.Config.Handler
	before.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.SetEndpoints([]kvroute.Endpoint{{ID: id, Address: after.srv.URL}}) // the pod is replaced mid-call
		inner.ServeHTTP(w, r)
	})
	p.SetEndpoints([]kvroute.Endpoint{{ID: id, Address: before.srv.URL}})
	require.False(t, p.PollOnce(context.Background()), "the old address's answer changes nothing")
	_, ok := p.Models(id)
	require.False(t, ok, "the old address's answer is not kept for the new one")
	require.True(t, p.PollOnce(context.Background()))
	ms, ok := p.Models(id)
	require.True(t, ok)
	require.Equal(t, []string{"new-model"}, ms)
}
