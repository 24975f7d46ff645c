package cluster

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// What a replica reads from Redis is written straight into the real
// redis-server here, as anyone with access to it could: the replica must
// keep its load tracker and index to its own endpoints, keep every label
// value valid and not take an old record for a live peer.

// A peer record naming 4,096 endpoints that are not the replica's adds none
// of them to its load tracker: they are dropped and counted, and the
// record's load on the replica's own endpoint is taken.
func TestRecordEndpointsOutsideTheEndpointSetAreDropped(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghost and the target, which Cleanup stops first
	_, g, x := startHostile(t, false)
	loads := []EndpointLoad{{Endpoint: known, Tokens: 300, Requests: 1}}
	for i := 0; i < DefaultMaxEndpoints-1; i++ {
		loads = append(loads, EndpointLoad{Endpoint: fmt.Sprintf("junk-%d.example:8000", i), Tokens: 1, Requests: 1})
	}
	g.record(1, time.Hour, loads...)
	x.r.read()
	require.Equal(t, []Peer{{ID: "ghost"}}, x.r.Peers())
	require.Equal(t, [2]int64{300, 1}, peerLoad(x.tr, known), "the load on the replica's own endpoint is taken")
	require.Equal(t, 1, x.tr.Len(), "the tracker holds the replica's endpoint only")
	require.EqualValues(t, DefaultMaxEndpoints-1, x.dropped(t, "unknown_endpoint"))
	x.r.Close()
}

// 20,000 load changes naming endpoints that are not the replica's add none
// of them to its load tracker.
func TestLoadChangesOutsideTheEndpointSetAreDropped(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghost and the target, which Cleanup stops first
	_, g, x := startHostile(t, true)
	seq := uint64(2)
	for m := 0; m < 20; m++ {
		deltas := make([]delta, 1000)
		for i := range deltas {
			deltas[i] = delta{endpoint: fmt.Sprintf("junk-%d-%d.example:8000", m, i), tokens: 1 << 40, requests: 1}
		}
		g.publish(seq, deltas...)
		seq += uint64(len(deltas))
	}
	g.publish(seq, delta{endpoint: known, tokens: 70, requests: 1}) // a marker: everything before it was handled
	awaitPeerLoad(t, x.tr, known, [2]int64{70, 1})
	require.Equal(t, 1, x.tr.Len(), "the tracker holds the replica's endpoint only")
	require.Equal(t, deltaBytes(known), x.r.PendingDeltaBytes(), "only the accepted change is pending")
	require.EqualValues(t, 20000, x.dropped(t, "unknown_endpoint"))
	x.r.Close()
}

// An endpoint name that is not valid UTF-8, in a load change or a record,
// never becomes a label value: the registry still gathers.
func TestInvalidEndpointNamesNeverReachALabel(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghost and the target, which Cleanup stops first
	_, g, x := startHostile(t, true)
	bad := known + "\xff"
	g.publish(2, delta{endpoint: bad, tokens: 5, requests: 1}, delta{endpoint: known, tokens: 70, requests: 1})
	awaitPeerLoad(t, x.tr, known, [2]int64{70, 1})
	_, err := x.reg.Gather()
	require.NoError(t, err, "a load change's invalid name does not break the metrics")

	g.record(3, time.Hour, EndpointLoad{Endpoint: "\xc3\x28", Tokens: 9, Requests: 1}, EndpointLoad{Endpoint: known, Tokens: 70, Requests: 1})
	x.r.read()
	require.Equal(t, [2]int64{70, 1}, peerLoad(x.tr, known))
	_, err = x.reg.Gather()
	require.NoError(t, err, "a record's invalid name does not break the metrics")
	require.Equal(t, 1, x.tr.Len())
	require.EqualValues(t, 2, x.dropped(t, "invalid_name"))
	x.r.Close()
}

// Decisions naming 2,000 endpoints that are not the replica's register none
// of them in its index; the decision for its own endpoint is applied.
func TestDecisionsOutsideTheEndpointSetAreDropped(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghost and the target, which Cleanup stops first
	_, g, x := startHostile(t, true)
	const junk = 2000
	msg := appendDecisionHeader(nil, "ghost", junk+1)
	for i := 0; i < junk; i++ {
		msg = appendDecision(msg, fmt.Sprintf("junk-%d.example:8000", i), []kvindex.Key{kvindex.Key(i + 1)})
	}
	msg = appendDecision(msg, known, []kvindex.Key{1, 2, 3}) // the marker, last in the message
	require.NoError(t, g.rdb.Publish(context.Background(), g.keys.channel, msg).Err())
	require.Eventually(t, func() bool { return x.r.Stats().Applied >= 1 }, deltaWait, time.Millisecond)
	require.Equal(t, 3, x.ix.Stats().Speculative, "the decision for the replica's endpoint is applied")
	require.Equal(t, 1, x.ix.Stats().Endpoints, "the index holds the replica's endpoint only")
	require.EqualValues(t, 1, x.r.Stats().Applied)
	require.EqualValues(t, junk, x.dropped(t, "unknown_endpoint"))
	x.r.Close()
}

// A record whose key has no TTL but whose send time is more than a lease
// ago is not a live peer: its phantom load of 2^62 tokens is ignored, it is
// not listed (nor as a bootstrap peer) and it is counted. One dated more
// than a lease ahead is not believed either.
func TestRecordOlderThanTheLeaseIsNotALivePeer(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghost and the target, which Cleanup stops first
	srv, g, x := startHostile(t, false)
	ctx := context.Background()
	put := func(sent time.Time) {
		rec := encodeRecord(nil, "http://ghost.example:9090/snapshot", uint64(sent.UnixMilli()), 1,
			[]EndpointLoad{{Endpoint: known, Tokens: 1 << 62, Requests: 1}}, nil)
		require.NoError(t, g.rdb.Set(ctx, g.keys.selfKey, rec, 0).Err()) // no TTL
		require.NoError(t, g.rdb.SAdd(ctx, g.keys.members, "ghost").Err())
	}
	lease := x.r.Config().Lease
	for _, sent := range []time.Time{time.Now().Add(-2 * lease), time.Now().Add(2 * lease)} {
		put(sent)
		x.r.read()
		tok, _, _ := x.tr.Load(known)
		require.Zero(t, tok, "the phantom load is ignored (sent %v)", sent)
		require.Empty(t, x.r.Peers())
		peers, _, err := LivePeers(ctx, Config{Addrs: []string{srv.Addr}, Pool: "d", ReplicaID: "a", Lease: lease, RefreshPeriod: time.Hour})
		require.NoError(t, err)
		require.Empty(t, peers, "not a peer to bootstrap from")
	}
	require.EqualValues(t, 2, counter(t, x.reg, "kvroute_cluster_stale_records_total", nil))

	put(time.Now()) // the same record, sent now, is a live peer
	x.r.read()
	tok, _, _ := x.tr.Load(known)
	require.Equal(t, int64(1<<62), tok)
	require.Equal(t, []Peer{{ID: "ghost", SnapshotURL: "http://ghost.example:9090/snapshot"}}, x.r.Peers())
	x.r.Close()
}

// An endpoint taken out of the replica's set loses its pending load changes
// and its peer load at the read SetEndpoints asks for, and later changes
// naming it are dropped.
func TestEndpointRemovedFromTheSetIsForgotten(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghost and the target, which Cleanup stops first
	_, g, x := startHostile(t, true)
	const other = "10.0.0.2:8000"
	g.publish(2, delta{endpoint: other, tokens: 30, requests: 1}, delta{endpoint: known, tokens: 70, requests: 1})
	awaitPeerLoad(t, x.tr, known, [2]int64{70, 1})
	require.Equal(t, [2]int64{30, 1}, peerLoad(x.tr, other))

	reads := x.r.Stats().Reads
	x.r.SetEndpoints([]string{known})
	require.Equal(t, deltaBytes(known), x.r.PendingDeltaBytes(), "the removed endpoint's change is forgotten")
	requirePendingBytesConsistent(t, x.r)
	require.Eventually(t, func() bool { return x.r.Stats().Reads > reads }, deltaWait, time.Millisecond)
	require.Equal(t, [2]int64{}, peerLoad(x.tr, other), "its peer load goes at the read SetEndpoints asks for")
	require.Equal(t, [2]int64{70, 1}, peerLoad(x.tr, known), "the kept endpoint's pending change stays")

	g.publish(4, delta{endpoint: other, tokens: 5, requests: 1}, delta{endpoint: known, tokens: 1, requests: 1})
	awaitPeerLoad(t, x.tr, known, [2]int64{71, 2})
	require.Equal(t, [2]int64{}, peerLoad(x.tr, other), "later changes naming it are dropped")
	x.r.Close()
}

// A member set grown by 100,000 garbage IDs is read only up to
// 4 × MaxPeers IDs per read: a read's memory does not grow with the set.
func TestMemberSetGarbageIsReadBounded(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghost and the target, which Cleanup stops first
	_, g, x := startHostile(t, false)
	ctx := context.Background()
	const junk = 100_000
	for b := 0; b < junk; b += 10_000 {
		ids := make([]any, 10_000)
		for i := range ids {
			ids[i] = fmt.Sprintf("junk-%06d", b+i)
		}
		require.NoError(t, g.rdb.SAdd(ctx, g.keys.members, ids...).Err())
	}
	x.r.read()
	maxPeers := x.r.Config().MaxPeers
	ignored := counter(t, x.reg, "kvroute_cluster_peers_ignored_total", nil)
	require.LessOrEqual(t, ignored, float64((membersRead-1)*maxPeers), "a read takes at most %d member IDs", membersRead*maxPeers)
	require.Empty(t, x.r.Peers())
	x.r.Close()
}

// aheadClock is the wall clock set ahead by d, as on a host whose NTP has
// failed.
type aheadClock struct {
	telemetry.Clock
	d time.Duration
}

func (c aheadClock) Now() time.Time { return c.Clock.Now().Add(c.d) }

// A replica whose clock is more than a lease off takes every peer's record
// for a stale one, and ignores it, but it does not take the peers out of
// the member set: their keys' leases are live, and every other replica
// reading between its removal and the peer's next refresh would lose the
// peer's load and membership, so that one bad clock made every replica's
// view of the pool flap.
func TestReplicaWithAClockOffLeavesThePeersInTheMemberSet(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	g := newGhost(t, srv.Addr)
	g.record(1, time.Hour, EndpointLoad{Endpoint: known, Tokens: 10, Requests: 1})
	ctx := context.Background()
	for _, off := range []time.Duration{7 * time.Hour, -7 * time.Hour} {
		reg := prometheus.NewRegistry()
		ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
		require.NoError(t, err)
		tr, err := tokenload.NewTracker(tokenload.Options{})
		require.NoError(t, err)
		cfg := Config{Addrs: []string{srv.Addr}, Pool: "d", ReplicaID: "skewed", Lease: 3 * time.Hour,
			RefreshPeriod: time.Hour, ReadPeriod: time.Hour, OpTimeout: 2 * time.Second}
		x, err := New(cfg, ix, tr, Options{Set: telemetry.Set{Registerer: reg, Clock: aheadClock{telemetry.Wall, off}}})
		require.NoError(t, err)
		t.Cleanup(x.Close)
		t.Cleanup(ix.Close)
		x.SetEndpoints([]string{known})
		x.read()
		require.Empty(t, x.Peers(), "the record is stale on its clock (%v off)", off)
		require.Positive(t, counter(t, reg, "kvroute_cluster_stale_records_total", nil), "and counted")
		member, err := g.rdb.SIsMember(ctx, g.keys.members, g.id).Result()
		require.NoError(t, err)
		require.True(t, member, "the peer stays in the member set (%v off)", off)
		x.Close()
		ix.Close()
	}
}

// A record's loads, each within the wire's bound of 2⁶², add up saturating
// rather than wrapping: a record naming the replica's endpoint twice at the
// bound (or peers whose records together pass it) makes it the most loaded
// endpoint, not an idle one.
func TestRecordLoadsSaturateInsteadOfWrapping(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghost and the target, which Cleanup stops first
	_, g, x := startHostile(t, false)
	top := EndpointLoad{Endpoint: known, Tokens: 1 << 62, Requests: 1 << 62}
	g.record(1, time.Hour, top, top)
	x.r.read()
	require.Equal(t, [2]int64{math.MaxInt64, math.MaxInt64}, peerLoad(x.tr, known))
	x.r.Close()
}

// So do the load changes of a peer whose record has not been read yet.
func TestUnrecordedPeerChangesSaturateInsteadOfWrapping(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghost and the target, which Cleanup stops first
	_, g, x := startHostile(t, false)
	top := delta{endpoint: known, tokens: 1 << 62, requests: 1 << 62}
	g.publish(2, top, top)
	awaitPeerLoad(t, x.tr, known, [2]int64{math.MaxInt64, math.MaxInt64})
	x.r.read()
	require.Equal(t, [2]int64{math.MaxInt64, math.MaxInt64}, peerLoad(x.tr, known))
	x.r.Close()
}
