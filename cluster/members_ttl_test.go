package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
)

// Every refresh gives the member set a TTL of the lease, so the set of a
// pool whose last replica stopped without leaving (a crash) goes by itself,
// with no other replica to read and prune it.
func TestMemberSetExpiresWithThePoolsLastLease(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	g := newGhost(t, srv.Addr) // a client on pool "d"; it writes nothing here
	ctx := context.Background()
	const lease = time.Second
	r, _ := quietReplica(t, srv.Addr, "a", func(c *Config) { c.Lease, c.RefreshPeriod = lease, lease/2 })

	ttl, err := g.rdb.PTTL(ctx, g.keys.members).Result()
	require.NoError(t, err)
	require.Positive(t, ttl, "the member set has a TTL (-1: none)")
	require.LessOrEqual(t, ttl, lease)
	member, err := g.rdb.SIsMember(ctx, g.keys.members, "a").Result()
	require.NoError(t, err)
	require.True(t, member)

	CloseWithoutCleanup(r) // the pool's last replica crashes: nobody reads or prunes
	require.Eventually(t, func() bool {
		n, err := g.rdb.Exists(ctx, g.keys.members, g.keys.replica("a")).Result()
		require.NoError(t, err)
		return n == 0
	}, deltaWait, 5*time.Millisecond, "the member set and the record expire within a lease")
}
