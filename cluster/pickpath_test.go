package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
)

// No Redis round trip on Pick's path: with the server paused (CLIENT PAUSE
// ALL: it takes connections and commands but answers none until the pause
// ends), every Pick, with its dispatch, its decision published and its
// release, returns long before the pause ends. A synchronous Redis call
// anywhere on that path (publishing the decision, the load change) would
// wait out the pause, since the operation timeout here is longer than it.
// This asserts that nothing blocks, not a speed: the Picks are timed only
// for the log, and what fails the test is Redis having resumed by the time
// they are done.
func TestPickNeverWaitsForRedis(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	const pause = 5 * time.Second
	eps := endpoints(4)
	r := newRouter(t, srv.Addr, "a", func(c *kvroute.Config) { c.Cluster.OpTimeout = 2 * pause }, kvroute.Options{})
	defer r.Close()
	pick(t, r, prompt(100, 512), eps).Done(kvroute.DoneInfo{}) // warm: the publisher and the subscription are up

	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	probe := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer probe.Close()
	require.NoError(t, probe.Ping(ctx).Err()) // connected before the pause
	require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err())
	var slowest time.Duration
	for i := 0; i < 20; i++ {
		start := time.Now()
		d := pick(t, r, prompt(i, 1024), eps)
		d.Done(kvroute.DoneInfo{})
		slowest = max(slowest, time.Since(start))
	}
	// The Picks ran while Redis answered nothing: a PING still times out.
	// A Pick that waited for Redis would have returned only after the pause.
	require.Error(t, probe.Ping(ctx).Err(), "Redis answered again before the Picks were done: a Pick waited for it")
	t.Logf("slowest Pick with Redis paused: %v (pause %v)", slowest, pause)
	require.NoError(t, admin.Do(ctx, "CLIENT", "UNPAUSE").Err())
	r.Close()
}
