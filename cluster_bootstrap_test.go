package kvroute

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/telemetry"
)

// A new replica of an active-active pool, configured with the pool's Redis and
// no peer URLs, finds a live replica through the pool's membership and starts
// with that replica's complete index.
func TestNewReplicaBootstrapsFromALivePeerOfItsPool(t *testing.T) {
	defer leakcheck.Check(t)()
	rs := redistest.Start(t)
	defer func() { _ = rs.Stop() }()

	var handler atomic.Pointer[http.Handler]
	srvA := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := handler.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		http.Error(w, "not yet", http.StatusServiceUnavailable)
	}))
	defer srvA.Close()

	base := func(id, snapshotURL string) Config {
		cfg := DefaultConfig()
		cfg.Model = testModel
		cfg.Events.Enabled = new(false)
		cfg.DisableRender = true
		cfg.Cluster = cluster.Config{Addrs: []string{rs.Addr}, Pool: "bootstrap", ReplicaID: id, SnapshotURL: snapshotURL}
		return cfg
	}
	a, err := New(context.Background(), base("a", srvA.URL), Options{})
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

	bcfg := base("b", "")
	require.Eventually(t, func() bool { // a's lease record is written by its refresh loop
		peers, _, err := cluster.LivePeers(context.Background(), bcfg.Cluster)
		return err == nil && len(peers) == 1 && peers[0].ID == "a"
	}, 20*time.Second, 10*time.Millisecond)

	reg := prometheus.NewRegistry()
	b, err := New(context.Background(), bcfg, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer b.Close()
	require.Equal(t, want, b.Index().Stats().Memberships, "b starts with a's index")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "kvroute_index_restore_total" {
			for _, mm := range mf.GetMetric() {
				labels := map[string]string{}
				for _, lp := range mm.GetLabel() {
					labels[lp.GetName()] = lp.GetValue()
				}
				if labels["source"] == "cluster_peer" && labels["result"] == "loaded" && mm.GetCounter().GetValue() == 1 {
					found = true
				}
			}
		}
	}
	require.True(t, found, "the restore is counted as loaded from a cluster peer")
}
