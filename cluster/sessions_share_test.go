package cluster_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/telemetry"
)

// An Affinity shares its sessions with one replica: a second replica is
// refused (the first would go on handing the peers' records to the
// Affinity after Close), and so is a call after Close, which would
// otherwise take the replica's sessions from the Affinity that replaced
// it, for good. Nothing is left running once everything is closed.
func TestAffinitySharesOnceAndNeverAfterClose(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	regA := prometheus.NewRegistry()
	a, q, closeAll := sessionPair(t, srv.Addr, regA)
	defer closeAll() // before the leak check and the server's stop, should the test fail
	p := newRouter(t, srv.Addr, "p", nil, kvroute.Options{})
	defer p.Close()

	old, err := session.New(session.Config{}, session.Options{})
	require.NoError(t, err)
	require.NoError(t, old.Share(a.Cluster()))
	require.NoError(t, old.Share(a.Cluster()), "the same replica again")
	require.Error(t, old.Share(p.Cluster()), "a second replica was taken")
	old.Close()
	require.ErrorIs(t, old.Share(a.Cluster()), session.ErrClosed)

	next, err := session.New(session.Config{}, session.Options{})
	require.NoError(t, err)
	defer next.Close()
	require.NoError(t, next.Share(a.Cluster()))
	require.ErrorIs(t, old.Share(a.Cluster()), session.ErrClosed, "late: must not displace next")

	eps := endpoints(8)
	d, err := q.Pick(context.Background(), &kvroute.Request{Header: http.Header{"X-Session-Id": {"conv-1"}},
		Prompts: []render.Prompt{{TokenIDs: prompt(1, 256)}}}, eps)
	require.NoError(t, err)
	d.Done(kvroute.DoneInfo{})
	require.Eventually(t, func() bool { ep, ok := next.Endpoint("conv-1"); return ok && ep == d.Endpoint.ID }, waitFor, time.Millisecond,
		"q's session reaches next through a")
	require.Zero(t, old.Len(), "a closed Affinity learned a peer's session")
	// The replica counts a record applied once its sink returned, after
	// next stored it: wait for the count rather than read it at once.
	require.Eventually(t, func() bool { return sessionsApplied(regA) == 1 }, waitFor, time.Millisecond,
		"a applied the record once")
}

// sessionPair starts replica a (registering on reg) and replica q, whose
// Router keeps sessions in an Affinity shared with q's replica; closeAll
// closes q, its Affinity and a.
func sessionPair(t *testing.T, addr string, reg prometheus.Registerer) (a, q *kvroute.Router, closeAll func()) {
	t.Helper()
	a = newRouter(t, addr, "a", nil, kvroute.Options{Set: telemetry.Set{Registerer: reg}})
	affQ, err := session.New(session.Config{}, session.Options{})
	require.NoError(t, err)
	q = newRouter(t, addr, "q", nil, kvroute.Options{Scorers: []kvroute.WeightedScorer{affQ.Scorer()}, Profile: affQ.Profile(nil)})
	require.NoError(t, affQ.Share(q.Cluster()))
	return a, q, func() { q.Close(); affQ.Close(); a.Close() }
}

// sessionsApplied reads kvroute_cluster_sessions_applied_total from reg,
// -1 when it cannot: it runs in require.Eventually's goroutine, where a
// test may not fail.
func sessionsApplied(reg *prometheus.Registry) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() == "kvroute_cluster_sessions_applied_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// An Affinity that shares a replica another one still shares takes it
// over, and the other's Close then leaves the replica's sharing to it:
// before, closing the replaced Affinity detached the replica and the one
// that replaced it never learned a peer's session again.
func TestAffinityCloseLeavesTheReplicaToItsReplacement(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	a, q, closeAll := sessionPair(t, srv.Addr, nil)
	defer closeAll()

	old, err := session.New(session.Config{}, session.Options{})
	require.NoError(t, err)
	require.NoError(t, old.Share(a.Cluster()))
	next, err := session.New(session.Config{}, session.Options{})
	require.NoError(t, err)
	defer next.Close()
	require.NoError(t, next.Share(a.Cluster()), "next takes a over while old is open")
	old.Close()

	d, err := q.Pick(context.Background(), &kvroute.Request{Header: http.Header{"X-Session-Id": {"conv-2"}},
		Prompts: []render.Prompt{{TokenIDs: prompt(2, 256)}}}, endpoints(8))
	require.NoError(t, err)
	d.Done(kvroute.DoneInfo{})
	require.Eventually(t, func() bool { ep, ok := next.Endpoint("conv-2"); return ok && ep == d.Endpoint.ID }, waitFor, time.Millisecond,
		"q's session reaches next through a after old's Close")
}
