package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/kvindex"
)

// burst routes a burst of requests sharing one new 2,048-token prefix
// round-robin over the routers and returns the endpoints chosen. The first
// decision is awaited on every other router (as decisions or as load, per
// awaitDecision) before the rest of the burst is sent.
func burst(t *testing.T, rs []*kvroute.Router, eps []kvroute.Endpoint, awaitDecision bool) []string {
	t.Helper()
	shared := prompt(77, 2048)
	req := func(i int) []uint32 { return append(append([]uint32{}, shared...), prompt(900+i, 100)...) }
	first := pick(t, rs[0], req(0), eps)
	chosen := []string{first.Endpoint.ID}
	held := []*kvroute.Decision{first}
	for _, r := range rs[1:] {
		if awaitDecision {
			require.Eventually(t, func() bool { return r.Cluster().Stats().Applied >= 1 }, waitFor, 2*time.Millisecond)
		} else {
			require.Eventually(t, func() bool { tok, _, _ := r.Load().Load(first.Endpoint.ID); return tok > 0 }, waitFor, 2*time.Millisecond)
		}
	}
	for i := 1; i < 9; i++ {
		d := pick(t, rs[i%len(rs)], req(i), eps)
		chosen = append(chosen, d.Endpoint.ID)
		held = append(held, d)
	}
	for _, d := range held {
		d.Done(kvroute.DoneInfo{})
	}
	return chosen
}

// Shared decisions keep a burst of one new prefix on one endpoint across
// three replicas, as one router's speculative entries would; without them
// the other replicas see only the first request's load and spread the burst.
func TestSharedDecisionsKeepBurstOnOneEndpoint(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	eps := endpoints(4)

	rs := []*kvroute.Router{
		newRouter(t, srv.Addr, "a", nil, kvroute.Options{}),
		newRouter(t, srv.Addr, "b", nil, kvroute.Options{}),
		newRouter(t, srv.Addr, "c", nil, kvroute.Options{}),
	}
	chosen := burst(t, rs, eps, true)
	for i, id := range chosen {
		require.Equal(t, chosen[0], id, "request %d of the burst left the prefix's endpoint: %v", i, chosen)
	}
	// The peers applied the first decision as a speculative entry on it.
	var m kvindex.MatchResult
	keys := kvindex.Keys(nil, prompt(77, 2048), 64, &kvindex.KeyParams{Model: testModel})
	rs[1].Index().Match(keys, []string{chosen[0]}, &m)
	require.Equal(t, 32, m.Endpoints()[0].Blocks)
	require.Eventually(t, func() bool { return rs[0].Cluster().Stats().Published == 3 }, waitFor, 2*time.Millisecond,
		"a publishes its three decisions")
	st := rs[0].Cluster().Stats()
	require.Zero(t, st.Dropped)
	t.Logf("bytes per decision: %.0f (2,148-token prompts, block size 64: 33 keys)", float64(st.PublishedBytes)/float64(st.Published))
	for _, r := range rs {
		r.Close()
	}

	// Control: shared load, no shared decisions.
	off := func(c *kvroute.Config) { c.Cluster.DisableSharedDecisions = true; c.Cluster.Pool = "control" }
	rs = []*kvroute.Router{
		newRouter(t, srv.Addr, "a", off, kvroute.Options{}),
		newRouter(t, srv.Addr, "b", off, kvroute.Options{}),
		newRouter(t, srv.Addr, "c", off, kvroute.Options{}),
	}
	chosen = burst(t, rs, eps, false)
	distinct := map[string]bool{}
	for _, id := range chosen {
		distinct[id] = true
	}
	require.Greater(t, len(distinct), 1, "without shared decisions the replicas split the prefix: %v", chosen)
	for _, r := range rs {
		r.Close()
	}
}

// Pick with the cluster on (peer load in the tracker) allocates exactly what
// it allocates without, and keeps working, from memory, with Redis gone. The
// measured replica's background periods are long so that only Pick runs
// while allocations are counted (AllocsPerRun counts every goroutine's);
// Publish's own allocations are measured in TestPublishDoesNotAllocate.
func TestPickAllocationsUnchangedAndRedisFree(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	eps := endpoints(8)
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	local, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	require.NoError(t, err)
	defer local.Close()
	peer := newRouter(t, srv.Addr, "b", nil, kvroute.Options{})
	defer peer.Close()
	hold := pick(t, peer, prompt(5, 4000), eps) // peer load on one endpoint
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	require.Eventually(t, func() bool {
		v, err := rdb.Get(context.Background(), "kvroute:{test}:replica:b").Bytes()
		if err != nil {
			return false
		}
		rec, err := cluster.DecodeRecord(v)
		return err == nil && len(rec.Loads) > 0 // the record carries b's endpoint load
	}, waitFor, 2*time.Millisecond)
	quiet := func(c *kvroute.Config) {
		c.Cluster.RefreshPeriod, c.Cluster.ReadPeriod, c.Cluster.Lease = time.Hour, time.Hour, 3*time.Hour
		c.Cluster.DisableSharedDecisions = true
	}
	shared := newRouter(t, srv.Addr, "a", quiet, kvroute.Options{})
	defer shared.Close()
	require.Eventually(t, func() bool {
		tok, _, _ := shared.Load().Load(hold.Endpoint.ID)
		return tok == hold.UncachedTokens
	}, waitFor, time.Millisecond, "the read SetEndpoints asks for brings the peer's load")

	p := prompt(1, 2048)
	allocs := func(r *kvroute.Router) float64 {
		for i := 0; i < 10; i++ { // warm the scratch pools
			pick(t, r, p, eps).Done(kvroute.DoneInfo{})
		}
		return testing.AllocsPerRun(200, func() { pick(t, r, p, eps).Done(kvroute.DoneInfo{}) })
	}
	base, withCluster := allocs(local), allocs(shared)
	t.Logf("allocations per Pick: %.0f without the cluster, %.0f with it", base, withCluster)
	if !raceEnabled {
		require.Equal(t, base, withCluster)
	}

	require.NoError(t, srv.Stop())
	peer.Close()
	d := pick(t, shared, prompt(3, 1024), eps)
	require.Equal(t, affinity.OutcomeNoMatch, d.Outcome, "routed by load, from memory")
	d.Done(kvroute.DoneInfo{})
	hold.Done(kvroute.DoneInfo{})
}
