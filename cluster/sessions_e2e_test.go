package cluster_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
)

// Two router replicas with session affinity share one real redis-server: a
// session whose turn replica A routed is preferred on the same endpoint by
// replica B, whose own index holds nothing of the session's new turn (the
// turns share no block), without B calling Redis while it picks.
func TestSessionRecordedOnOneReplicaIsPreferredOnAnother(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	newReplica := func(id string) (*kvroute.Router, *session.Affinity) {
		aff, err := session.New(session.Config{}, session.Options{})
		require.NoError(t, err)
		t.Cleanup(aff.Close)
		r := newRouter(t, srv.Addr, id, nil, kvroute.Options{Scorers: []kvroute.WeightedScorer{aff.Scorer()}, Profile: aff.Profile(nil)})
		require.NoError(t, aff.Share(r.Cluster()))
		return r, aff
	}
	a, affA := newReplica("a")
	b, affB := newReplica("b")
	eps := endpoints(8)
	ask := func(r *kvroute.Router, key string, seed int) string {
		d, err := r.Pick(context.Background(), &kvroute.Request{Header: http.Header{"X-Session-Id": {key}},
			Prompts: []render.Prompt{{TokenIDs: prompt(seed, 256)}}}, eps)
		require.NoError(t, err)
		d.Done(kvroute.DoneInfo{})
		return d.Endpoint.ID
	}
	for s, key := range []string{"conv-1", "conv-2", "conv-3", "conv-4", "conv-5", "conv-6"} {
		home := ask(a, key, 10*s)
		require.Eventually(t, func() bool { ep, ok := affB.Endpoint(key); return ok && ep == home }, waitFor, time.Millisecond)
		for turn := 1; turn <= 3; turn++ {
			require.Equal(t, home, ask(b, key, 10*s+turn), "session %s turn %d on replica b", key, turn)
		}
		// And back: b's turns are known to a.
		require.Eventually(t, func() bool { _, ok := affA.Endpoint(key); return ok }, waitFor, time.Millisecond)
		require.Equal(t, home, ask(a, key, 10*s+9))
	}
	a.Close()
	b.Close()
}
