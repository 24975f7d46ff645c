package kvroute

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// Requests whose end never comes (the host lost them) stay bounded: the one
// request table holds at most MaxRequests decisions, drops them at the TTL,
// and every drop ends the decision, so the accuracy loop holds nothing for
// them either. A request committed afterwards still closes the loop.
func TestLostRequestsStayBoundedAndTheLoopStillObserves(t *testing.T) {
	const lost = 200_000
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	r := testRouter(t, func(c *Config) { c.Speculative.Enabled = new(false) }, Options{Set: telemetry.Set{Registerer: reg, Clock: clock}})
	eps := endpoints(2)
	p := prompt(1, 128)
	req := &Request{Prompts: []render.Prompt{{TokenIDs: p}}}
	for i := range lost {
		req.ID = fmt.Sprintf("lost-%d", i)
		_, err := r.Pick(context.Background(), req, eps)
		require.NoError(t, err)
		if i == lost/2 {
			clock.Add(tokenload.DefaultTrackedRequestTTL) // the first half expires on the next Register
		}
	}
	require.LessOrEqual(t, r.Requests().Len(), tokenload.DefaultMaxTrackedRequests)
	require.EqualValues(t, r.Requests().Len(), r.acc.Pending(), "every prediction the table dropped was ended in the accuracy loop")

	clock.Add(tokenload.DefaultTrackedRequestTTL) // every lost request expires on the next Register
	engineStores(t, r.Index(), eps[0].ID, p, 1)
	req.ID = "fresh"
	_, err := r.Pick(context.Background(), req, eps)
	require.NoError(t, err)
	require.Equal(t, 1, r.Requests().Len(), "only the fresh request is left")
	require.EqualValues(t, 1, r.acc.Pending(), "the expired decisions left the accuracy loop")

	fresh := r.Decision("fresh")
	require.NotNil(t, fresh)
	o, ok := fresh.Done(DoneInfo{CachedTokens: 64, HasCachedTokens: true})
	require.True(t, ok, "the fresh request's engine answer reaches the accuracy loop")
	require.Equal(t, 64, o.Actual)
	require.Nil(t, r.Decision("fresh"))
	require.Zero(t, r.acc.Pending())
	require.Equal(t, 1.0, series(t, reg, "kvroute_router_prediction_observed_total", fresh.Endpoint.ID))
}

// The table evicts requests while their hosts end them: each request ends
// once, by whichever comes first, and nothing stays counted.
func TestEvictionRacesDone(t *testing.T) {
	r := testRouter(t, func(c *Config) {
		c.Speculative.Enabled = new(false)
		c.Requests.MaxRequests = 4
	}, Options{})
	eps := endpoints(3)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				req := &Request{ID: fmt.Sprintf("g%d-%d", g, i), Prompts: []render.Prompt{{TokenIDs: prompt(g*1000+i, 200)}}}
				d, err := r.Pick(context.Background(), req, eps)
				if err != nil {
					t.Error(err)
					return
				}
				if i%3 != 0 { // every third is lost, and evicted
					d.FirstChunk()
					d.Done(DoneInfo{CachedTokens: 0, HasCachedTokens: i%2 == 0})
				}
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, r.Requests().Len(), 4)
	require.EqualValues(t, r.Requests().Len(), r.acc.Pending())
	for g := range 4 { // end the lost ones still filed
		for i := 0; i < 300; i += 3 {
			r.Decision(fmt.Sprintf("g%d-%d", g, i)).Done(DoneInfo{})
		}
	}
	require.Zero(t, r.Requests().Len())
	require.Zero(t, r.acc.Pending())
	for _, e := range eps {
		tok, reqs, _ := r.load.Load(e.ID)
		require.Zero(t, tok+reqs, e.ID)
	}
}
