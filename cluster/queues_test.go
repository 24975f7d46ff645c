package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
)

// A replica's queue depths reach its peer with its record: the peer sums
// them per band it has, drops (and counts) the bands it does not have,
// and forgets a peer whose record is stale or gone.
func TestQueueDepthsSharedWithRecords(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // registered first, so it runs after the replicas' cleanups
	srv := redistest.Start(t)
	defer func() { _ = srv.Stop() }()
	x := newHostileTarget(t, srv.Addr) // replica "a" of pool "d", reading on demand
	x.r.ShareQueues([]int{1, -1, 1}, nil)
	g := newGhost(t, srv.Addr)
	ctx := context.Background()
	put := func(sent time.Time, queues ...QueueDepth) {
		rec := encodeRecord(nil, "", uint64(sent.UnixMilli()), 1, nil, queues)
		require.NoError(t, g.rdb.Set(ctx, g.keys.selfKey, rec, time.Hour).Err())
		require.NoError(t, g.rdb.SAdd(ctx, g.keys.members, "ghost").Err())
	}

	put(time.Now(), QueueDepth{Priority: 1, Requests: 3}, QueueDepth{Priority: 7, Requests: 1 << 30}, QueueDepth{Priority: -1, Requests: 2})
	x.r.read()
	require.Equal(t, []QueueDepth{{Priority: 1, Requests: 3}, {Priority: -1, Requests: 2}}, x.r.PeerQueues(nil))
	require.Equal(t, 1.0, counter(t, x.reg, "kvroute_cluster_queue_bands_dropped_total", nil), "band 7 is not one of a's")

	put(time.Now(), QueueDepth{Priority: 1, Requests: maxQueueRequests + 1}) // out of range: the record is invalid
	x.r.read()
	require.Empty(t, x.r.PeerQueues(nil))
	require.Equal(t, 1.0, counter(t, x.reg, "kvroute_cluster_invalid_records_total", nil))

	put(time.Now().Add(-2*x.r.Config().Lease), QueueDepth{Priority: 1, Requests: 3}) // stale: not a live peer
	x.r.read()
	require.Empty(t, x.r.PeerQueues(nil))

	put(time.Now(), QueueDepth{Priority: 1, Requests: 4})
	x.r.read()
	require.Equal(t, []QueueDepth{{Priority: 1, Requests: 4}}, x.r.PeerQueues(nil))
	require.NoError(t, g.rdb.Del(ctx, g.keys.selfKey).Err()) // the peer leaves
	x.r.read()
	require.Empty(t, x.r.PeerQueues(nil))
}

// Two replicas publishing through their refresh loops: each sees the
// other's depth within the staleness bound, and its own is not counted.
func TestQueueDepthsBetweenTwoReplicas(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // registered first, so it runs after the replicas' cleanups
	srv := redistest.Start(t)
	defer func() { _ = srv.Stop() }()
	var depthA, depthB atomic.Int64
	source := func(n *atomic.Int64) func([]QueueDepth) []QueueDepth {
		return func(dst []QueueDepth) []QueueDepth {
			return append(dst, QueueDepth{Priority: 1, Requests: n.Load()}, QueueDepth{Priority: 0})
		}
	}
	fast := func(c *Config) {
		c.RefreshPeriod, c.ReadPeriod, c.Lease = 20*time.Millisecond, 20*time.Millisecond, 3*time.Second
	}
	a, _ := quietReplica(t, srv.Addr, "a", fast)
	b, _ := quietReplica(t, srv.Addr, "b", fast)
	a.ShareQueues([]int{1, 0}, source(&depthA))
	b.ShareQueues([]int{1, 0}, source(&depthB))
	depthA.Store(5)
	require.Eventually(t, func() bool {
		q := b.PeerQueues(nil)
		return len(q) == 1 && q[0] == QueueDepth{Priority: 1, Requests: 5}
	}, 20*time.Second, time.Millisecond)
	require.Empty(t, a.PeerQueues(nil), "b has nothing queued")
	depthB.Store(2)
	depthA.Store(0)
	require.Eventually(t, func() bool {
		q := a.PeerQueues(nil)
		return len(q) == 1 && q[0].Requests == 2 && len(b.PeerQueues(nil)) == 0
	}, 20*time.Second, time.Millisecond)
	a.Close()
	require.Eventually(t, func() bool { return len(b.PeerQueues(nil)) == 0 }, 20*time.Second, time.Millisecond)
}

// The bands this replica leaves out of its record, beyond maxQueueBands
// bands with requests waiting or with a priority beyond ±maxQueuePriority
// (an admission config accepts any number of objectives and any priority),
// are counted at every refresh by reason: they used to be left out of the
// peers' fleet gauge without a trace.
func TestQueueBandsLeftOutOfRecordAreCounted(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // registered first, so it runs after the replicas' cleanups
	srv := redistest.Start(t)
	defer func() { _ = srv.Stop() }()
	x := newHostileTarget(t, srv.Addr)
	var own []QueueDepth
	for p := maxQueueBands + 1; p >= 0; p-- { // maxQueueBands+2 bands, highest first; band 0 has nothing waiting
		own = append(own, QueueDepth{Priority: p, Requests: int64(p)})
	}
	own = append(own, QueueDepth{Priority: maxQueuePriority + 1, Requests: 1}, QueueDepth{Priority: -maxQueuePriority - 1, Requests: 1},
		QueueDepth{Priority: maxQueuePriority + 2}) // nothing waiting: not left out
	bands := make([]int, 0, len(own))
	for _, q := range own {
		bands = append(bands, q.Priority)
	}
	x.r.ShareQueues(bands, func(dst []QueueDepth) []QueueDepth { return append(dst, own...) })
	x.r.refresh()
	x.r.refresh()

	g := newGhost(t, srv.Addr)
	rec, err := g.rdb.Get(context.Background(), newKeys("d", "a").selfKey).Bytes()
	require.NoError(t, err)
	got, err := decodeRecord(rec, DefaultMaxEndpoints)
	require.NoError(t, err)
	require.Len(t, got.Queues, maxQueueBands, "the highest bands with requests waiting")
	require.Equal(t, QueueDepth{Priority: maxQueueBands + 1, Requests: maxQueueBands + 1}, got.Queues[0])
	require.Equal(t, QueueDepth{Priority: 2, Requests: 2}, got.Queues[maxQueueBands-1])
	require.Equal(t, 2.0, counter(t, x.reg, "kvroute_cluster_record_queue_bands_dropped_total", map[string]string{"reason": "max_bands"}),
		"band 1 left out of each of 2 records")
	require.Equal(t, 4.0, counter(t, x.reg, "kvroute_cluster_record_queue_bands_dropped_total", map[string]string{"reason": "priority_range"}),
		"2 bands beyond ±maxQueuePriority left out of each of 2 records")
}
