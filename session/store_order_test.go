package session

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// newOrderFixture is an Affinity of MaxEntries sessions (one shard) with a
// one-minute TTL on a manual clock.
func newOrderFixture(t *testing.T, maxEntries int) (*Affinity, *telemetry.Manual) {
	t.Helper()
	clk := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	a, err := New(Config{TTL: time.Minute, MaxEntries: maxEntries}, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Clock: clk}})
	require.NoError(t, err)
	t.Cleanup(a.Close)
	return a, clk
}

// A peer's record, stored as of its turn, is older than the local turns
// recorded before it arrived: it expires before them, so a new session in
// the full store removes it (counted as expired) and evicts no live
// session.
func TestPeerRecordExpiresBeforeLaterLocalTurns(t *testing.T) {
	a, clk := newOrderFixture(t, 3)
	a.Record("a", "10.0.0.1:8000")
	clk.Advance(30 * time.Second)
	a.Record("b", "10.0.0.1:8000")
	a.learn(Hash("peer"), []byte("10.0.0.2:8000"), 50*time.Second) // routed 20 s before "a"
	clk.Advance(15 * time.Second)                                  // "peer" is 65 s old, "a" 45 s
	a.Record("c", "10.0.0.1:8000")

	for _, k := range []string{"a", "b", "c"} {
		_, ok := a.Endpoint(k)
		require.True(t, ok, "live session %q was forgotten", k)
	}
	_, ok := a.Endpoint("peer")
	require.False(t, ok)
	require.Equal(t, 3, a.Len(), "the expired peer record was removed")
	require.Zero(t, testutil.ToFloat64(a.met.evicted))
	require.Equal(t, 1.0, testutil.ToFloat64(a.met.expired))

	// Full of live sessions, the store evicts the earliest routed: "a".
	a.Record("d", "10.0.0.1:8000")
	require.Equal(t, 1.0, testutil.ToFloat64(a.met.evicted))
	_, ok = a.Endpoint("a")
	require.False(t, ok)
	for _, k := range []string{"b", "c", "d"} {
		_, ok := a.Endpoint(k)
		require.True(t, ok, "session %q was evicted before an earlier one", k)
	}
}

// A peer's newer record of a stored session moves it to its turn's place,
// not ahead of later turns: it then expires in time order too.
func TestPeerUpdateKeepsTimeOrder(t *testing.T) {
	a, clk := newOrderFixture(t, 2)
	a.Record("x", "10.0.0.1:8000")
	clk.Advance(30 * time.Second)
	a.Record("y", "10.0.0.1:8000")
	clk.Advance(10 * time.Second)
	a.learn(Hash("x"), []byte("10.0.0.2:8000"), 20*time.Second) // "x" routed 10 s before "y"
	ep, ok := a.Endpoint("x")
	require.True(t, ok)
	require.Equal(t, "10.0.0.2:8000", ep)
	clk.Advance(45 * time.Second) // "x" is 65 s old, "y" 55 s
	a.Record("z", "10.0.0.1:8000")

	_, ok = a.Endpoint("y")
	require.True(t, ok, "a live session was evicted while an expired one stayed")
	require.Zero(t, testutil.ToFloat64(a.met.evicted))
	require.Equal(t, 1.0, testutil.ToFloat64(a.met.expired))
}

// However records arrive, each shard's list runs from the latest record
// to the earliest, so expiry from the tail never stops at a live entry
// ahead of an expired one.
func TestStoreListStaysInTimeOrder(t *testing.T) {
	s := newStore(64, int64(time.Hour))
	// Local turns at increasing times, peers' at times in between, before
	// the head, after the tail, and equal to stored ones.
	ats := []int64{100, 200, 300, 150, 50, 250, 300, 100, 400, 10, 399, 201, 5, 500, 450}
	for i, at := range ats {
		s.record(uint64(i)<<4, "e", at, at < 400 && i > 2)
	}
	s.record(uint64(3)<<4, "e", 420, true) // an update moves forward
	s.record(uint64(0)<<4, "e", 120, true) // and within the list
	sh := s.shard(0)
	n, last, prev := 0, int64(1<<62), int32(-1)
	for j := sh.head; j >= 0; j = sh.ents[j].next {
		require.LessOrEqual(t, sh.ents[j].at, last, "entry %d is later than the one before it", n)
		require.Equal(t, prev, sh.ents[j].prev, "entry %d's back link", n)
		last, prev = sh.ents[j].at, j
		n++
	}
	require.Equal(t, len(ats), n)
	require.Equal(t, prev, sh.tail)
}
