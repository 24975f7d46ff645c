package kvroute

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/checkpoint"
	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/telemetry"
)

// A new replica whose pool lists, before a healthy replica, one whose
// record advertises a URL that never answers and one that stops sending
// halfway through its snapshot, abandons the stalled ones (at the progress
// deadline, counted as a timeout, or cancelled when another begins sending;
// see racePeers) and starts with the healthy replica's index: the bootstrap
// timeout, far longer, is not waited out. The assertions are on the
// outcome, not on the time taken.
func TestClusterBootstrapSkipsStalledPeers(t *testing.T) {
	defer leakcheck.Check(t)()
	rs := redistest.Start(t)
	defer func() { _ = rs.Stop() }()
	stop := make(chan struct{})

	var handler atomic.Pointer[http.Handler]
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := handler.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		http.Error(w, "not yet", http.StatusServiceUnavailable)
	}))
	defer healthy.Close()
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // accepts the request, answers nothing
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	defer silent.Close()
	var half atomic.Pointer[[]byte]
	midway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", checkpoint.SnapshotContentType)
		_, _ = w.Write(*half.Load()) // the first half of a valid snapshot, then nothing
		w.(http.Flusher).Flush()
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	defer midway.Close()
	defer close(stop) // first of the deferred closes: the stalled handlers return

	const progress = time.Second
	base := func(id, snapshotURL string) Config {
		cfg := DefaultConfig()
		cfg.Model = testModel
		cfg.Events.Enabled = new(false)
		cfg.DisableRender = true
		cfg.Cluster = cluster.Config{Addrs: []string{rs.Addr}, Pool: "stall", ReplicaID: id, SnapshotURL: snapshotURL}
		cfg.Bootstrap.ProgressTimeout = progress
		cfg.Bootstrap.Timeout = 60 * progress
		return cfg
	}
	a, err := New(context.Background(), base("c-healthy", healthy.URL), Options{})
	require.NoError(t, err)
	defer a.Close()
	h := a.SnapshotHandler()
	handler.Store(&h)
	eps := endpoints(2)
	require.NoError(t, a.SetEndpoints(eps))
	tokens := prompt(1, 4*a.Index().BlockSize())
	engineStores(t, a.Index(), eps[0].ID, tokens, 100)
	engineStores(t, a.Index(), eps[1].ID, tokens[:2*a.Index().BlockSize()], 200)
	want := a.Index().Stats().Memberships
	require.EqualValues(t, 6, want)
	var snap bytes.Buffer
	_, err = a.Index().WriteSnapshot(&snap)
	require.NoError(t, err)
	firstHalf := snap.Bytes()[:snap.Len()/2]
	half.Store(&firstHalf)

	// Two replicas listed before the healthy one (peers are tried in ID
	// order) whose records advertise the stalling URLs.
	for _, s := range []struct{ id, url string }{{"a-silent", silent.URL}, {"b-midway", midway.URL}} {
		r, err := New(context.Background(), base(s.id, s.url), Options{})
		require.NoError(t, err)
		defer r.Close()
	}
	bcfg := base("d-new", "")
	require.Eventually(t, func() bool { // the records are written by the replicas' refresh loops
		peers, _, err := cluster.LivePeers(context.Background(), bcfg.Cluster)
		return err == nil && len(peers) == 3
	}, 20*time.Second, 10*time.Millisecond)

	// A new replica joins the pool.
	reg := prometheus.NewRegistry()
	b, err := New(context.Background(), bcfg, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, want, b.Index().Stats().Memberships, "the new replica starts with the healthy peer's index")
	require.EqualValues(t, 1, restores(t, reg, "cluster_peer", "loaded"))
	// The replica that stalled mid-stream is abandoned as a timeout; the
	// silent one is too if it is still being waited for at its progress
	// deadline, and not counted if it is cancelled because another began
	// sending first.
	require.GreaterOrEqual(t, restores(t, reg, "cluster_peer", "timeout"), 1.0)
}
