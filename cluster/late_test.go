package cluster

import (
	"context"
	"sync"
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

// capturingStore is the real Redis store that also hands every published
// decision message to the test, which delivers it to a manual replica.
type capturingStore struct {
	redisStore
	mu   sync.Mutex
	msgs [][]byte
}

func (s *capturingStore) Publish(ctx context.Context, channel string, msg []byte) error {
	s.mu.Lock()
	s.msgs = append(s.msgs, append([]byte(nil), msg...))
	s.mu.Unlock()
	return s.redisStore.Publish(ctx, channel, msg)
}

func (s *capturingStore) take() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgs
	s.msgs = nil
	return m
}

// manualOnRedis is a replica of pool "late" that starts no goroutine, over
// a real redis-server, on the clock *now.
func manualOnRedis(t *testing.T, st Store, id string, now *time.Time) (*Replica, *Manual, *tokenload.Tracker) {
	t.Helper()
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1, SpeculativeTTL: time.Second}, kvindex.Options{})
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	tr, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	cfg := Config{Pool: "late", ReplicaID: id, Lease: time.Hour, RefreshPeriod: time.Minute, ReadPeriod: time.Minute}
	m, err := NewManual(cfg, ix, tr, st, Options{Set: telemetry.Set{Clock: pointerClock{Clock: telemetry.Wall, now: now}}})
	require.NoError(t, err)
	r := m.Replica()
	t.Cleanup(r.Close)
	r.SetEndpoints(testEndpointIDs())
	return r, m, tr
}

// pointerClock reads its time from *now; a manual replica sets no timers.
type pointerClock struct {
	telemetry.Clock
	now *time.Time
}

func (c pointerClock) Now() time.Time { return *c.now }

// A replica that starts routing between a peer's listing of the members and
// that peer's merge of the records (the read raced its registration) keeps
// its load at the peer: the dispatch is not dropped while the matching end,
// arriving later, subtracts from the peer load (which then read -700 tokens
// until the next read). A replica that never registers is forgotten a lease
// after its first change.
func TestLoadOfAReplicaRegisteredAfterTheReadIsKept(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	st := &capturingStore{redisStore: redisStore{rdb: rdb}}
	now := time.Unix(1_800_000_000, 0)
	a, ma, trA := manualOnRedis(t, st, "a", &now)
	ma.Refresh()
	ma.Read()
	_, mb, trB := manualOnRedis(t, st, "b", &now)
	deliver := func() {
		mb.Flush()
		for _, m := range st.take() {
			ma.Apply(m)
		}
	}
	const ep = "10.0.0.1:8000"

	h := trB.Dispatch(ep, 700)
	deliver()
	require.Equal(t, [2]int64{700, 1}, peerLoad(trA, ep), "the dispatch reached a")
	ma.Read() // lists the members before b's first refresh registers it
	require.Equal(t, [2]int64{700, 1}, peerLoad(trA, ep), "a read that did not list b keeps b's changes")
	h.Done()
	deliver()
	require.Equal(t, [2]int64{}, peerLoad(trA, ep), "the end cancels the dispatch; the peer load never goes negative")

	// b registers: its record supersedes the changes it includes.
	h2 := trB.Dispatch(ep, 300)
	deliver()
	mb.Refresh()
	ma.Read()
	require.Equal(t, [2]int64{300, 1}, peerLoad(trA, ep))
	require.Zero(t, a.PendingDeltaBytes(), "the record includes the dispatch")
	h2.Done()
	deliver()
	require.Equal(t, [2]int64{}, peerLoad(trA, ep))

	// c sends a change but never registers: kept while younger than a lease,
	// forgotten after.
	_, mc, trC := manualOnRedis(t, st, "c", &now)
	trC.Dispatch(ep, 500)
	mc.Flush()
	for _, m := range st.take() {
		ma.Apply(m)
	}
	require.Equal(t, [2]int64{500, 1}, peerLoad(trA, ep))
	now = now.Add(40 * time.Minute)
	mb.Refresh()
	ma.Read()
	require.Equal(t, [2]int64{500, 1}, peerLoad(trA, ep), "younger than the lease")
	now = now.Add(40 * time.Minute)
	mb.Refresh()
	ma.Read()
	require.Equal(t, [2]int64{}, peerLoad(trA, ep), "a lease after its first change, an unregistered sender is forgotten")
	require.Zero(t, a.PendingDeltaBytes())
}
