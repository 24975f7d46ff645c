package cluster_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
)

// On a real three-node Redis Cluster the pool's hash tag keeps its keys in
// one slot: the multi-key read works, load is summed and decisions are
// shared, with classic and with sharded pub/sub.
func TestRedisCluster(t *testing.T) {
	defer leakcheck.Check(t)()
	rc := redistest.StartCluster(t, 3)
	defer rc.Stop()
	eps := endpoints(4)
	for _, sharded := range []bool{false, true} {
		pool := map[bool]string{false: "classic", true: "sharded"}[sharded]
		cfg := func(c *kvroute.Config) {
			c.Cluster.Addrs = rc.Addrs
			c.Cluster.Pool = pool
			c.Cluster.ShardedPubSub = sharded
		}
		a := newRouter(t, "unused:0", "a", cfg, kvroute.Options{})
		b := newRouter(t, "unused:0", "b", cfg, kvroute.Options{})
		// The cluster client loads the slot map on its first commands, which
		// may outlast OpTimeout on a loaded machine: wait for the membership.
		require.Eventually(t, func() bool { return len(a.Cluster().Peers()) == 1 && len(b.Cluster().Peers()) == 1 },
			waitFor, 5*time.Millisecond, "%s: a and b find each other", pool)

		chosen := burst(t, []*kvroute.Router{a, b}, eps, true)
		for i, id := range chosen {
			require.Equal(t, chosen[0], id, "%s: request %d left the prefix's endpoint: %v", pool, i, chosen)
		}
		held := []*kvroute.Decision{pick(t, a, prompt(3, 3000), eps), pick(t, b, prompt(4, 3000), eps)}
		sum := localSum(eps, a, b)
		require.Eventually(t, func() bool { return equalLoads(loads(a, eps), sum) && equalLoads(loads(b, eps), sum) },
			waitFor, 5*time.Millisecond, "%s: a %v b %v want %v", pool, loads(a, eps), loads(b, eps), sum)
		require.False(t, a.Cluster().Degraded())
		for _, d := range held {
			d.Done(kvroute.DoneInfo{})
		}
		a.Close()
		b.Close()
	}
}
