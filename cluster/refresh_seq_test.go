package cluster

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// A load change made while a replica builds its record is counted once by
// a peer: the record's totals include exactly the changes numbered up to
// the record's sequence number, so the peer's keeping the changes above it
// adds nothing the record already holds. (When the totals were read from
// the tracker after the sequence number, the change was in both, and the
// peer counted it twice until the next record.)
func TestLoadChangeDuringRefreshIsCountedOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	st := &capturingStore{redisStore: redisStore{rdb: rdb}}
	now := time.Unix(1_800_000_000, 0)
	_, ma, trA := manualOnRedis(t, st, "a", &now)
	b, mb, trB := manualOnRedis(t, st, "b", &now)
	const ep = "10.0.0.1:8000"

	trB.Dispatch(ep, 700)
	b.testHookRefresh = func() { trB.Dispatch(ep, 300) } // lands while b builds its record
	mb.Refresh()
	b.testHookRefresh = nil
	mb.Flush()
	for _, m := range st.take() {
		ma.Apply(m)
	}
	ma.Read()
	require.Equal(t, [2]int64{1000, 2}, peerLoad(trA, ep), "each dispatch counted once")

	mb.Refresh()
	ma.Read()
	require.Equal(t, [2]int64{1000, 2}, peerLoad(trA, ep), "the next record agrees")
}

// Load the tracker held before the replica was built is in the replica's
// records, and its release, observed later, takes it out again.
func TestLoadFromBeforeTheReplicaIsPublishedAndReleased(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	st := &capturingStore{redisStore: redisStore{rdb: rdb}}
	now := time.Unix(1_800_000_000, 0)
	_, ma, trA := manualOnRedis(t, st, "a", &now)
	const ep = "10.0.0.1:8000"

	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1, SpeculativeTTL: time.Second}, kvindex.Options{})
	require.NoError(t, err)
	defer ix.Close()
	trB, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	early := trB.Dispatch(ep, 400) // before b exists
	cfg := Config{Pool: "late", ReplicaID: "b", Lease: time.Hour, RefreshPeriod: time.Minute, ReadPeriod: time.Minute}
	mb, err := NewManual(cfg, ix, trB, st, Options{Set: telemetry.Set{Clock: pointerClock{Clock: telemetry.Wall, now: &now}}})
	require.NoError(t, err)
	defer mb.Replica().Close()
	mb.Replica().SetEndpoints(testEndpointIDs())

	mb.Refresh()
	ma.Read()
	require.Equal(t, [2]int64{400, 1}, peerLoad(trA, ep), "the record holds the earlier load")
	early.Done()
	mb.Flush()
	for _, m := range st.take() {
		ma.Apply(m)
	}
	require.Equal(t, [2]int64{}, peerLoad(trA, ep), "its release reached the peer")
	mb.Refresh()
	ma.Read()
	require.Equal(t, [2]int64{}, peerLoad(trA, ep), "and the next record has no load left")
}
