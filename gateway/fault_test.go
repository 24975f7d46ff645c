package gateway

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/accuracy"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/render"
)

// TestClosedLoopCatchesSuppressedEvents: an engine whose KV events are
// suppressed (no sequence gap, so the event machinery sees nothing wrong)
// reuses prompts the index never heard of. The gateway reads the engine's
// cached_tokens, the router counts the misses, marks the endpoint
// inaccurate and asks its event pool for a resync; once events flow again
// the predictions are exact.
func TestClosedLoopCatchesSuppressedEvents(t *testing.T) {
	defer leakcheck.Check(t)()
	f := startSimFleet(t, 1, func(c *kvroute.Config) {
		c.Speculative.Enabled = new(false) // only the engine's events tell the index anything
		c.Accuracy = accuracy.Config{Window: 4, MissRatio: 0.4, Resync: true}
	})
	defer f.close(t)
	require.Eventually(t, func() bool { code, _ := f.get(t, "/ready"); return code == http.StatusOK }, wait, 10*time.Millisecond)
	ep := f.eps[0].ID
	r := f.gw.Router()

	resp, err := f.client.Post("http://"+ep+"/sim/suppress_kv_events?on=true", "", nil)
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	observed := 0
	send := func(prompt string) DecisionRecord {
		t.Helper()
		f.complete(t, prompt)
		observed++
		require.Eventually(t, func() bool { return len(f.gw.Handler().Recent()) == observed }, wait, time.Millisecond)
		return f.gw.Handler().Recent()[0]
	}
	for i := range 2 {
		p := strings.Repeat("suppressed "+strconv.Itoa(i)+" ", 100)
		first := send(p)
		require.Equal(t, 0, first.Error, "a cold prompt: nothing predicted, nothing reused")
		again := send(p)
		require.Positive(t, again.ActualCached, "the engine cached it")
		require.Negative(t, again.Error, "the index never heard of it")
	}
	require.True(t, r.EndpointInaccurate(ep))
	reg := f.gw.Registry()
	missing, err := testutil.GatherAndCount(reg, "kvroute_router_prediction_missing_total")
	require.NoError(t, err)
	require.Equal(t, 1, missing)
	_, metrics := f.get(t, "/metrics")
	require.Contains(t, metrics, `kvroute_router_accuracy_resyncs_total{endpoint="`+ep+`",result="requested"} 1`)
	require.Contains(t, metrics, `kvroute_router_endpoint_inaccurate{endpoint="`+ep+`"} 1`)
	_, page := f.get(t, StatusPath)
	require.Contains(t, page, "missing persistently")
	require.Eventually(t, func() bool {
		st, _ := r.Events().Status(ep)
		return st.State == "live"
	}, wait, 10*time.Millisecond, "the resync replayed and the stream is live again")

	// Events flow again: new prompts are predicted exactly.
	resp, err = f.client.Post("http://"+ep+"/sim/suppress_kv_events?on=false", "", nil)
	require.NoError(t, err)
	readAll(t, resp)
	for i := range 4 {
		p := strings.Repeat("healthy "+strconv.Itoa(i)+" ", 100)
		send(p)
		require.Eventually(t, func() bool {
			return r.Index().EndpointBlocks(ep) > 0
		}, wait, 10*time.Millisecond)
		require.Eventually(t, func() bool {
			d, err := r.Pick(context.Background(), &kvroute.Request{API: render.APICompletions, Body: []byte(completionsBody(p, false))}, f.eps)
			require.NoError(t, err)
			d.Done(kvroute.DoneInfo{})
			return d.CachedTokens > 0
		}, wait, 10*time.Millisecond, "the engine's events for the prompt arrived")
		again := send(p)
		require.Equal(t, 0, again.Error, "%+v", again)
	}
	require.False(t, r.EndpointInaccurate(ep), "accurate again")
}
