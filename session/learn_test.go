package session

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// A peer's record older than the TTL (its replica's TTL is longer, or it
// published late) is expired on arrival: it is counted as expired, not
// learned, and takes no room, so a full store keeps its live sessions.
func TestPeerRecordPastTTLEvictsNothing(t *testing.T) {
	clk := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	a, err := New(Config{TTL: time.Minute, MaxEntries: 1}, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Clock: clk}})
	require.NoError(t, err)
	defer a.Close()
	a.Record("live", "10.0.0.1:8000")
	a.learn(Hash("stale"), []byte("10.0.0.2:8000"), time.Minute+time.Second)
	ep, ok := a.Endpoint("live")
	require.True(t, ok, "a live session was evicted for an expired peer record")
	require.Equal(t, "10.0.0.1:8000", ep)
	require.Equal(t, 1, a.Len())
	require.Zero(t, testutil.ToFloat64(a.met.evicted))
	require.Zero(t, testutil.ToFloat64(a.met.peer[peerLearned]))
	require.Equal(t, 1.0, testutil.ToFloat64(a.met.peer[peerExpired]))
	require.Equal(t, 1.0, testutil.ToFloat64(a.met.expired))

	a.learn(Hash("fresh"), []byte("10.0.0.2:8000"), time.Second) // within the TTL: learned, evicts for room
	require.Equal(t, 1.0, testutil.ToFloat64(a.met.peer[peerLearned]))
	require.Equal(t, 1.0, testutil.ToFloat64(a.met.evicted))
}

// A peer's record of a turn older than the one the store holds is ignored
// by the store, and counted as superseded, not learned: the learned count
// says how many peers' records the store took.
func TestPeerRecordOlderThanStoredIsSuperseded(t *testing.T) {
	clk := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	a, err := New(Config{TTL: time.Minute}, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Clock: clk}})
	require.NoError(t, err)
	defer a.Close()
	clk.Advance(10 * time.Second)
	a.Record("conv", "10.0.0.1:8000")
	a.learn(Hash("conv"), []byte("10.0.0.2:8000"), time.Second) // a turn before the one stored
	ep, ok := a.Endpoint("conv")
	require.True(t, ok)
	require.Equal(t, "10.0.0.1:8000", ep, "the later turn stays")
	require.Zero(t, testutil.ToFloat64(a.met.peer[peerLearned]))
	require.Equal(t, 1.0, testutil.ToFloat64(a.met.peer[peerSuperseded]))

	a.learn(Hash("conv"), []byte("10.0.0.2:8000"), 0) // a later turn than the one stored
	ep, _ = a.Endpoint("conv")
	require.Equal(t, "10.0.0.2:8000", ep)
	require.Equal(t, 1.0, testutil.ToFloat64(a.met.peer[peerLearned]))
	require.Equal(t, 1.0, testutil.ToFloat64(a.met.peer[peerSuperseded]))
}
