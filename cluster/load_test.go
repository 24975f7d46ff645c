package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
)

// Three routers share one Redis and the same endpoints: once the records
// have been read, the load each one's filter and scorer see is the sum of
// the three local loads, and releasing one router's requests lowers every
// router's view.
func TestLoadSeenByEachReplicaIsTheSum(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop() // before leakcheck: its Wait goroutine ends with the process
	eps := endpoints(4)
	rs := []*kvroute.Router{
		newRouter(t, srv.Addr, "a", nil, kvroute.Options{}),
		newRouter(t, srv.Addr, "b", nil, kvroute.Options{}),
		newRouter(t, srv.Addr, "c", nil, kvroute.Options{}),
	}
	var held [3][]*kvroute.Decision
	for i := 0; i < 30; i++ {
		r := i % 3
		held[r] = append(held[r], pick(t, rs[r], prompt(100+i, 1000+37*i), eps))
	}
	want := localSum(eps, rs...)
	var total int64
	for _, v := range want {
		total += v[1]
	}
	require.Equal(t, int64(30), total)
	for i, r := range rs {
		require.Eventually(t, func() bool { return equalLoads(loads(r, eps), want) }, waitFor, 5*time.Millisecond,
			"router %d sees %v, want the sum %v", i, loads(r, eps), want)
	}

	for _, d := range held[1] { // router b's requests finish
		d.FirstChunk()
		d.Done(kvroute.DoneInfo{})
	}
	want = localSum(eps, rs...)
	for i, r := range rs {
		require.Eventually(t, func() bool { return equalLoads(loads(r, eps), want) }, waitFor, 5*time.Millisecond,
			"router %d sees %v after b's requests ended, want %v", i, loads(r, eps), want)
	}
	for _, r := range rs { // the load may arrive by the changes before a read lists the peers
		require.Eventually(t, func() bool { return len(r.Cluster().Peers()) == 2 }, waitFor, 5*time.Millisecond)
		require.False(t, r.Cluster().Degraded())
	}
	for _, r := range rs {
		r.Close()
	}
}

func equalLoads(a, b map[string][2]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A replica that stops without cleaning up (as a crash looks to its peers)
// keeps its load in the others' view only until its lease expires; a
// replica that closes normally leaves at once.
func TestStoppedReplicaLoadExpiresWithLease(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop() // before leakcheck: its Wait goroutine ends with the process
	eps := endpoints(2)
	a := newRouter(t, srv.Addr, "a", nil, kvroute.Options{})
	b := newRouter(t, srv.Addr, "b", nil, kvroute.Options{})
	c := newRouter(t, srv.Addr, "c", nil, kvroute.Options{})
	held := []*kvroute.Decision{pick(t, b, prompt(1, 4096), eps), pick(t, c, prompt(2, 4096), eps)}
	want := localSum(eps, a, b, c)
	require.Eventually(t, func() bool { return equalLoads(loads(a, eps), want) }, waitFor, 5*time.Millisecond)

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	lease := b.Cluster().Config().Lease
	ttl, err := rdb.PTTL(context.Background(), "kvroute:{test}:replica:b").Result()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Duration(0))
	require.LessOrEqual(t, ttl, lease, "the record lives no longer than the lease")

	stopped := time.Now()
	cluster.CloseWithoutCleanup(b.Cluster())
	want = localSum(eps, a, c)
	require.Eventually(t, func() bool { return equalLoads(loads(a, eps), want) }, waitFor, 5*time.Millisecond,
		"b's load must leave a's view when b's lease expires")
	t.Logf("a crashed replica's load left the peers' view %v after it stopped (lease %v, read period %v)",
		time.Since(stopped).Round(time.Millisecond), lease, a.Cluster().Config().ReadPeriod)
	require.Eventually(t, func() bool { return len(a.Cluster().Peers()) == 1 }, waitFor, 5*time.Millisecond)
	// The member-set entry goes at the first read after b's key has expired
	// in Redis, which may be a read after the one that found b's record
	// stale on a's clock and dropped its load.
	require.Eventually(t, func() bool {
		n, err := rdb.SIsMember(context.Background(), "kvroute:{test}:replicas", "b").Result()
		require.NoError(t, err)
		return !n
	}, waitFor, 5*time.Millisecond, "the expired member is pruned from the member set")

	c.Close() // normal leave: its record is deleted, a drops its load at the next read
	require.Eventually(t, func() bool { return equalLoads(loads(a, eps), localSum(eps, a)) }, waitFor, 5*time.Millisecond)
	exists, err := rdb.Exists(context.Background(), "kvroute:{test}:replica:c").Result()
	require.NoError(t, err)
	require.Zero(t, exists, "Close deletes the record")
	for _, d := range held {
		d.Done(kvroute.DoneInfo{})
	}
	a.Close()
	b.Close()
}

// Membership: a replica started after others finds them, with their snapshot
// URLs, as soon as New returns.
func TestNewReplicaListsLivePeers(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop() // before leakcheck: its Wait goroutine ends with the process
	a := newRouter(t, srv.Addr, "a", nil, kvroute.Options{})
	b := newRouter(t, srv.Addr, "b", nil, kvroute.Options{})
	c := newRouter(t, srv.Addr, "c", nil, kvroute.Options{})
	require.Equal(t, []cluster.Peer{
		{ID: "a", SnapshotURL: "http://a.example:9090/snapshot"},
		{ID: "b", SnapshotURL: "http://b.example:9090/snapshot"},
	}, c.Cluster().Peers())
	require.Equal(t, []string{"http://a.example:9090/snapshot", "http://b.example:9090/snapshot"}, c.Cluster().SnapshotURLs())
	require.Eventually(t, func() bool { return len(a.Cluster().Peers()) == 2 }, waitFor, 5*time.Millisecond)
	a.Close()
	b.Close()
	c.Close()
}

// A Router without Config.Cluster runs nothing of this package.
func TestNoClusterWithoutAddrs(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg := kvroute.DefaultConfig()
	cfg.Model = testModel
	cfg.Events.Enabled = new(false)
	cfg.DisableRender = true
	r, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	require.NoError(t, err)
	require.Nil(t, r.Cluster())
	r.Close()

	cfg.Cluster = cluster.Config{Addrs: []string{"127.0.0.1:1"}, Lease: time.Second, RefreshPeriod: time.Second}
	require.ErrorIs(t, cfg.Validate(), kvroute.ErrInvalidConfig, "a lease shorter than two refreshes")
	cfg.Cluster = cluster.Config{Addrs: []string{"127.0.0.1:1"}, Pool: "a{b}"}
	require.ErrorIs(t, cfg.Validate(), kvroute.ErrInvalidConfig, "braces would break the hash tag")
}
