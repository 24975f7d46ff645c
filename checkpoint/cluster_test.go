package checkpoint

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// A keeper whose router belongs to a pool, with no configured peers, loads
// the index of a live replica that advertises its snapshot URL; with
// configured peers, the pool is not asked; a pool with no live replica has
// no snapshot to offer ("missing"), which is no failure.
func TestRestoreFromALiveReplicaOfThePool(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	rs := redistest.Start(t)
	defer func() { _ = rs.Stop() }()
	pool := func(id, url string) cluster.Config {
		return cluster.Config{Addrs: []string{rs.Addr}, Pool: "ckpt", ReplicaID: id, SnapshotURL: url}
	}

	empty := newIndex(t, testBlockSize)
	_, err := ClusterPeerSource{Cluster: pool("x", "")}.Load(context.Background(), empty)
	require.ErrorIs(t, err, ErrNoSnapshot)
	require.Equal(t, "missing", restoreResult(err))

	p, srv := peer(t, "tok", 0)
	tracker, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	rep, err := cluster.New(pool("a", srv.URL), p.ix, tracker, cluster.Options{})
	require.NoError(t, err)
	defer rep.Close()
	require.Eventually(t, func() bool { // a's record is written by its refresh loop
		peers, _, err := cluster.LivePeers(context.Background(), pool("b", ""))
		return err == nil && len(peers) == 1 && peers[0].SnapshotURL == srv.URL
	}, 20*time.Second, 10*time.Millisecond)
	var want bytes.Buffer
	_, err = p.ix.WriteSnapshot(&want)
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	ix := newIndex(t, testBlockSize)
	k, err := Restore(context.Background(), ix, Config{}, BootstrapConfig{Token: "tok"},
		Options{Set: telemetry.Set{Registerer: reg, Logger: testLogger(t)}, Cluster: pool("b", "")})
	require.NoError(t, err)
	defer k.Close()
	require.Equal(t, 1.0, restores(t, reg, "cluster_peer", "loaded"))
	var got bytes.Buffer
	_, err = ix.WriteSnapshot(&got)
	require.NoError(t, err)
	require.Equal(t, want.Bytes(), got.Bytes(), "the new replica holds exactly the live one's index")

	// Configured peers replace the pool: here one that refuses the token.
	reg = prometheus.NewRegistry()
	k2, err := Restore(context.Background(), newIndex(t, testBlockSize), Config{}, BootstrapConfig{Peers: []string{srv.URL}, Token: "wrong"},
		Options{Set: telemetry.Set{Registerer: reg}, Cluster: pool("c", "")})
	require.NoError(t, err)
	defer k2.Close()
	require.Equal(t, 1.0, restores(t, reg, "peer", "refused"))
	require.Zero(t, restores(t, reg, "cluster_peer", "loaded"))
}

// A pool whose live replicas advertise no snapshot is no snapshot to
// offer, and the error says which members were passed over and why, for the
// operator of a replica that started empty.
func TestRestoreFromAPoolWithoutSnapshotsSaysWhy(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	rs := redistest.Start(t)
	defer func() { _ = rs.Stop() }()
	pool := func(id string) cluster.Config {
		return cluster.Config{Addrs: []string{rs.Addr}, Pool: "ckpt", ReplicaID: id}
	}
	tracker, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	rep, err := cluster.New(pool("a"), newIndex(t, testBlockSize), tracker, cluster.Options{})
	require.NoError(t, err)
	defer rep.Close()

	_, err = ClusterPeerSource{Cluster: pool("b")}.Load(context.Background(), newIndex(t, testBlockSize))
	require.ErrorIs(t, err, ErrNoSnapshot)
	require.Equal(t, "missing", restoreResult(err))
	require.ErrorContains(t, err, "0 unreadable, 0 stale, 1 without a snapshot URL, 0 expired")

	// Restore logs the reason.
	var logs bytes.Buffer
	k, err := Restore(context.Background(), newIndex(t, testBlockSize), Config{}, BootstrapConfig{},
		Options{Set: telemetry.Set{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, Cluster: pool("b")})
	require.NoError(t, err)
	k.Close()
	require.Contains(t, logs.String(), "1 without a snapshot URL")
}

// A pool whose Redis does not answer at start is counted as
// redis_unreachable, not as missing: an outage looked like a pool with no
// live replica, and the operator of a replica that started empty looked
// for the wrong cause. It is no failure of Restore, which goes on to the
// next source.
func TestRestoreWithThePoolsRedisDownCountsIt(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	addr := testport.Addr(t) // nothing listens there, nor takes the port meanwhile
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	k, err := Restore(context.Background(), newIndex(t, testBlockSize), Config{}, BootstrapConfig{},
		Options{Set: telemetry.Set{Registerer: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
			Cluster: cluster.Config{Addrs: []string{addr}, Pool: "down", ReplicaID: "b", OpTimeout: time.Second}})
	require.NoError(t, err)
	require.Equal(t, 1.0, restores(t, reg, "cluster_peer", "redis_unreachable"))
	require.Zero(t, restores(t, reg, "cluster_peer", "missing"))
	k.Close()
	require.Contains(t, logs.String(), "level=WARN")
	require.Contains(t, logs.String(), addr)
}
