package cluster

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/tokenload"
)

// hungServer accepts connections and never answers: a Redis that hangs.
func hungServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// hungReplica builds a replica on a hung Redis with OpTimeout op (client
// nil: its own client on addr) and returns it with the time New took.
func hungReplica(t *testing.T, addr string, client redis.UniversalClient, op time.Duration) (*Replica, time.Duration) {
	t.Helper()
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	tr, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	cfg := Config{Pool: "hang", ReplicaID: "a", Lease: 3 * time.Hour, RefreshPeriod: time.Hour, ReadPeriod: time.Hour, OpTimeout: op}
	if client == nil {
		cfg.Addrs = []string{addr}
	}
	start := time.Now()
	r, err := New(cfg, ix, tr, Options{Client: client})
	took := time.Since(start)
	require.NoError(t, err)
	t.Cleanup(r.Close)
	require.True(t, r.Degraded(), "a hung Redis is unreachable")
	return r, took
}

// The replica's copy of a user-supplied client honours context deadlines
// and retries no command, as the client New builds from Addrs does, so
// OpTimeout bounds its operations: against a Redis that never answers, New
// and Close return within a few OpTimeouts although the user's client
// waits 10 s for a reply. Before, the copy kept the user's
// ContextTimeoutEnabled (off by default), go-redis ignored the deadline
// OpTimeout sets, and each operation took the user's ReadTimeout.
func TestOpTimeoutBoundsOperationsOfAUserSuppliedClient(t *testing.T) {
	addr := hungServer(t)
	user := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
	defer user.Close()
	const op = 250 * time.Millisecond
	r, took := hungReplica(t, addr, user, op)
	require.Less(t, took, 3*op+2*time.Second, "New took %v with OpTimeout %v", took, op)
	start := time.Now()
	r.Close()
	took = time.Since(start)
	require.Less(t, took, op+2*time.Second, "Close took %v with OpTimeout %v", took, op)
	require.False(t, user.Options().ContextTimeoutEnabled, "the user's client is left as it is")
}

// Every kind of client kvroute copies gets the same settings.
func TestUserClientCopiesHonourContextDeadlines(t *testing.T) {
	lim := limitsFor(Config{}.WithDefaults())
	refused := func(int) {}
	for name, user := range map[string]redis.UniversalClient{
		"client":  redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}),
		"cluster": redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRetries: 5}),
		"ring":    redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}}),
	} {
		rdb, owned := clientFrom(user, lim, refused)
		require.True(t, owned, name)
		switch c := rdb.(type) {
		case *redis.Client:
			require.True(t, c.Options().ContextTimeoutEnabled, name)
			require.Zero(t, c.Options().MaxRetries, name)
		case *redis.ClusterClient:
			require.True(t, c.Options().ContextTimeoutEnabled, name)
			require.Equal(t, -1, c.Options().MaxRetries, name)
		case *redis.Ring:
			require.True(t, c.Options().ContextTimeoutEnabled, name)
			require.Zero(t, c.Options().MaxRetries, name)
		default:
			t.Fatalf("%s: copied as %T", name, rdb)
		}
		require.NoError(t, rdb.Close())
		require.NoError(t, user.Close())
	}
}

// New against a Redis that never answers waits out its refresh and its
// read, 2 × OpTimeout as its doc says, and leaves the subscription to the
// receiving goroutine. Before, it also waited out the subscription: 3 ×
// OpTimeout. OpTimeout is long enough here that the bound, 2 × OpTimeout
// plus 2 s of slack for a loaded machine, is under 3 × OpTimeout.
func TestNewOnAHungRedisWaitsOutOnlyItsRefreshAndRead(t *testing.T) {
	addr := hungServer(t)
	const op = 2500 * time.Millisecond
	r, took := hungReplica(t, addr, nil, op)
	require.Less(t, took, 2*op+2*time.Second, "New took %v with OpTimeout %v", took, op)
	require.GreaterOrEqual(t, took, op, "New waited on its refresh and read")
	r.cleanup = false // no record to delete from a Redis that never answers
	r.Close()
}

// A replica started while Redis is down (so New did not subscribe)
// subscribes from its receiving goroutine: once Redis is back, a peer's
// load change reaches it over pub/sub.
func TestReplicaStartedWithoutRedisSubscribesWhenRedisAnswers(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	require.NoError(t, srv.Stop())
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	defer ix.Close()
	tr, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	cfg := Config{Addrs: []string{srv.Addr}, Pool: "d", ReplicaID: "a", Lease: 3 * time.Hour,
		RefreshPeriod: 50 * time.Millisecond, ReadPeriod: 50 * time.Millisecond, OpTimeout: 2 * time.Second}
	r, err := New(cfg, ix, tr, Options{})
	require.NoError(t, err)
	defer r.Close()
	require.True(t, r.Degraded())
	r.SetEndpoints(testEndpointIDs())

	require.NoError(t, srv.Restart())
	require.Eventually(t, func() bool { return !r.Degraded() }, deltaWait, time.Millisecond)
	g := newGhost(t, srv.Addr)
	const ep = "10.0.0.1:8000"
	seq := uint64(1)
	require.Eventually(t, func() bool { // published until the subscription, retried in the background, is up
		seq++
		g.publish(seq, delta{endpoint: ep, tokens: 1, requests: 1})
		return peerLoad(tr, ep)[1] > 0
	}, deltaWait, 10*time.Millisecond)
	r.Close()
}
