package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/tokenload"
)

// A dispatch, its first chunk and its end on one replica reach the other's
// peer load by pub/sub alone: the records are not refreshed or read meanwhile.
func TestPeersSeeLoadChangesWithinAHop(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	b, trB := quietReplica(t, srv.Addr, "b", nil)
	defer b.Close()
	a, trA := quietReplica(t, srv.Addr, "a", nil)
	defer a.Close()
	readsA := a.Stats().Reads
	const ep = "10.0.0.1:8000"

	h := trB.Dispatch(ep, 700)
	awaitPeerLoad(t, trA, ep, [2]int64{700, 1},
		"the dispatch reaches a: %v", peerLoad(trA, ep))
	h.FirstChunk()
	awaitPeerLoad(t, trA, ep, [2]int64{0, 1},
		"the first chunk's release reaches a: %v", peerLoad(trA, ep))
	h.Done()
	awaitPeerLoad(t, trA, ep, [2]int64{},
		"the end of the request reaches a: %v", peerLoad(trA, ep))
	h2 := trB.Dispatch(ep, 300)
	awaitPeerLoad(t, trA, ep, [2]int64{300, 1})
	h2.Done() // cancelled before its first chunk: tokens and request at once
	awaitPeerLoad(t, trA, ep, [2]int64{})
	require.Equal(t, readsA, a.Stats().Reads, "no record read carried any of it")
	// b counts its changes once its PUBLISH returns, which may be after a
	// has already applied them.
	require.Eventually(t, func() bool { return b.Stats().Deltas == 5 }, deltaWait, time.Millisecond,
		"dispatch, first chunk, end; dispatch, end: %d", b.Stats().Deltas)
	require.Equal(t, 5.0, testutil.ToFloat64(a.met.deltasApplied))
	require.Zero(t, b.PendingDeltaBytes(), "b holds none of its own")
	require.Equal(t, tokenload.PeerLoad{}, trB.PeerLoadOf(ep), "a replica does not apply its own changes")
	a.Close()
	b.Close()
}

// The record is the source of truth: it supersedes the changes it includes
// (no double count), a change lost on the way is healed by the next record,
// a change at or below the last record's sequence is discarded, and a
// replica whose lease expired loses its load, changes included.
func TestRecordSupersedesAndHealsLoadChanges(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghosts and the replica, which Cleanup stops first
	const ep = "10.0.0.9:8000"
	g, a, tr := startGhostPeer(t, 100, nil)
	require.Equal(t, []Peer{{ID: "ghost"}}, a.Peers())

	g.publish(101, delta{endpoint: ep, tokens: 500, requests: 1}, delta{endpoint: ep, tokens: 200, requests: 1})
	awaitPeerLoad(t, tr, ep, [2]int64{700, 2})
	require.Equal(t, 2*deltaBytes(ep), a.PendingDeltaBytes())

	// The record of seq 101 includes the first change only: the second stays on top, once.
	g.record(101, time.Hour, EndpointLoad{Endpoint: ep, Tokens: 500, Requests: 1})
	a.read()
	require.Equal(t, [2]int64{700, 2}, peerLoad(tr, ep), "no double count")
	require.Equal(t, deltaBytes(ep), a.PendingDeltaBytes(), "the included change is discarded")

	// Change 103 (the end of the 500-token request) is lost; 104 arrives.
	g.publish(104, delta{endpoint: ep, tokens: -200, requests: -1})
	awaitPeerLoad(t, tr, ep, [2]int64{500, 1},
		"a sees what arrived, missing the lost change: %v", peerLoad(tr, ep))
	g.record(104, time.Hour) // the ghost's totals after 104: nothing in flight
	a.read()
	require.Equal(t, [2]int64{}, peerLoad(tr, ep), "the record heals the lost change")
	require.Zero(t, a.PendingDeltaBytes())

	// A late copy of an included change is discarded.
	g.publish(103, delta{endpoint: ep, tokens: -500, requests: -1}, delta{endpoint: ep, tokens: 9, requests: 1})
	g.publish(105, delta{endpoint: ep, tokens: 40, requests: 1}) // a marker: the late one was handled before it
	awaitPeerLoad(t, tr, ep, [2]int64{40, 1},
		"stale changes ignored: %v", peerLoad(tr, ep))
	require.Equal(t, 2.0, testutil.ToFloat64(a.met.deltasSuperseded))

	// The lease expires: the record and the changes above it go.
	g.record(105, 200*time.Millisecond, EndpointLoad{Endpoint: ep, Tokens: 40, Requests: 1})
	g.publish(106, delta{endpoint: ep, tokens: 60, requests: 1})
	awaitPeerLoad(t, tr, ep, [2]int64{100, 2})
	require.Eventually(t, func() bool {
		a.read()
		return peerLoad(tr, ep) == [2]int64{} && len(a.Peers()) == 0
	}, deltaWait, 20*time.Millisecond, "a dead replica's load, changes included, disappears with its lease")
	require.Zero(t, a.PendingDeltaBytes())
	a.Close()
}

// A load change numbered far above anything the sender's records reach (a
// forged or broken sender: anyone who can publish on the channel can name
// a live peer) is never superseded by a record, so it used to stay on top
// of that peer's load for as long as the peer lived. A live record is sent
// after every change received here more than a lease (plus the clocks'
// disagreement) before it, and includes it: a change still above the
// peer's live record 2 × Lease after it arrived is dropped and counted
// (reason stale), and the peer's load is its record's again.
func TestLoadChangeNoRecordSupersedesExpires(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghosts and the replica, which Cleanup stops first
	const ep = "10.0.0.9:8000"
	const lease = 600 * time.Millisecond
	g, a, tr := startGhostPeer(t, 100, func(c *Config) { c.Lease, c.RefreshPeriod = lease, lease/2 },
		EndpointLoad{Endpoint: ep, Tokens: 1, Requests: 1})
	require.Equal(t, [2]int64{1, 1}, peerLoad(tr, ep))

	g.publish(1<<40, delta{endpoint: ep, tokens: 1000, requests: 5})
	awaitPeerLoad(t, tr, ep, [2]int64{1001, 6})
	start := time.Now()
	require.Eventually(t, func() bool {
		g.record(101, time.Hour, EndpointLoad{Endpoint: ep, Tokens: 1, Requests: 1}) // the ghost lives on
		a.read()
		return peerLoad(tr, ep) == [2]int64{1, 1}
	}, deltaWait, 20*time.Millisecond, "the change no record supersedes goes: %v", peerLoad(tr, ep))
	require.GreaterOrEqual(t, time.Since(start), lease, "kept while a record may still include it")
	require.Zero(t, a.PendingDeltaBytes())
	require.Equal(t, 1.0, testutil.ToFloat64(a.met.deltasDropped[deltaDropStale]))
	a.Close()
}

// A replica restarted under its ID on a host whose clock is behind its
// previous life's numbers its changes below them: its new record, of a
// lower sequence number, is a new life, and the changes of the previous
// life still pending here (sent after its last record, before it died) are
// not kept on top of it, nor are they ever superseded by the new life's
// lower numbers.
func TestRestartedReplicaWithAClockBehindLeavesNoPhantomLoad(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghosts and the replica, which Cleanup stops first
	const ep = "10.0.0.9:8000"
	g, a, tr := startGhostPeer(t, 1_000_000, nil, EndpointLoad{Endpoint: ep, Tokens: 100, Requests: 1})
	require.Equal(t, [2]int64{100, 1}, peerLoad(tr, ep))

	// The previous life's last dispatch, sent after its last record.
	g.publish(1_000_001, delta{endpoint: ep, tokens: 50, requests: 1})
	awaitPeerLoad(t, tr, ep, [2]int64{150, 2})

	// It dies and restarts at once on a clock a second behind: its new
	// record's totals are its own, numbered below the previous life's.
	g.record(500, time.Hour, EndpointLoad{Endpoint: ep, Tokens: 10, Requests: 1})
	a.read()
	require.Equal(t, [2]int64{10, 1}, peerLoad(tr, ep), "the new life's record alone")
	require.Zero(t, a.PendingDeltaBytes(), "nothing of the previous life is held")

	// The new life's changes above its record apply.
	g.publish(501, delta{endpoint: ep, tokens: 7, requests: 1})
	awaitPeerLoad(t, tr, ep, [2]int64{17, 2})
	a.Close()
}

// Pending changes are bounded in bytes: over the bound they are dropped,
// counted, and that peer goes by its records until the next one.
func TestPendingLoadChangesBoundedInBytes(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghosts and the replica, which Cleanup stops first
	const ep = "10.0.0.9:8000"
	g, a, tr := startGhostPeer(t, 10, func(c *Config) { c.MaxPendingDeltaBytes = 2 * deltaBytes(ep) })
	g.publish(11, delta{endpoint: ep, tokens: 1, requests: 1}, delta{endpoint: ep, tokens: 1, requests: 1},
		delta{endpoint: ep, tokens: 1, requests: 1})
	g.publish(14, delta{endpoint: ep, tokens: 1, requests: 1})
	awaitMemoryDrops(t, a, 2)
	require.Equal(t, [2]int64{2, 2}, peerLoad(tr, ep))
	require.Equal(t, 2*deltaBytes(ep), a.PendingDeltaBytes(), "never over the bound")
	g.record(14, time.Hour, EndpointLoad{Endpoint: ep, Tokens: 4, Requests: 4})
	a.read()
	require.Equal(t, [2]int64{4, 4}, peerLoad(tr, ep), "the record falls back to the truth")
	require.Zero(t, a.PendingDeltaBytes())
	g.publish(15, delta{endpoint: ep, tokens: 1, requests: 1})
	awaitPeerLoad(t, tr, ep, [2]int64{5, 5},
		"changes apply again after the record")
	a.Close()
}

// One peer floods load changes that its record never includes (a broken or
// hostile replica) and fills the pending bound. Before, every other peer's
// changes were then dropped for as long as the flood's stayed pending, that
// is for good: the others were seen by their records alone. Now a peer
// within its fair share of the bound evicts the flooder's pending changes
// (counted), and the flooder's later changes are ignored until its next
// record.
func TestLoadChangesOfAFloodingPeerDoNotShutOutTheOthers(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghosts and the replica, which Cleanup stops first
	const floodEP, honestEP = "10.0.0.9:8000", "10.0.0.10:8000"
	db := deltaBytes(floodEP)
	flood, honest, a, tr := startFloodAndHonest(t, 8*db)

	one := delta{endpoint: floodEP, tokens: 1, requests: 1}
	flood.publish(11, one, one, one, one, one, one, one, one, one) // the ninth is over the bound
	awaitMemoryDrops(t, a, 1)
	require.Equal(t, 8*db, a.PendingDeltaBytes())
	require.Equal(t, [2]int64{8, 8}, peerLoad(tr, floodEP))

	honest.publish(11, delta{endpoint: honestEP, tokens: 5, requests: 1})
	awaitPeerLoad(t, tr, honestEP, [2]int64{5, 1},
		"the honest peer's change applies")
	require.Equal(t, [2]int64{0, 0}, peerLoad(tr, floodEP), "the flood's pending changes were evicted")
	require.Equal(t, 1+8.0, testutil.ToFloat64(a.met.deltasDropped[deltaDropMemory]))
	require.Equal(t, deltaBytes(honestEP), a.PendingDeltaBytes())

	// The honest peer fills its share; the flooder is ignored until its next record.
	flood.publish(20, one)
	honest.publish(12, delta{endpoint: honestEP, tokens: 5, requests: 1}, delta{endpoint: honestEP, tokens: 5, requests: 1},
		delta{endpoint: honestEP, tokens: 5, requests: 1})
	awaitPeerLoad(t, tr, honestEP, [2]int64{20, 4})
	require.Equal(t, [2]int64{0, 0}, peerLoad(tr, floodEP))
	require.Equal(t, 1+8+1.0, testutil.ToFloat64(a.met.deltasDropped[deltaDropMemory]))
	require.Equal(t, 4*deltaBytes(honestEP), a.PendingDeltaBytes())

	flood.record(20, time.Hour, EndpointLoad{Endpoint: floodEP, Tokens: 10, Requests: 10})
	a.read()
	require.Equal(t, [2]int64{10, 10}, peerLoad(tr, floodEP), "the flooder's record is its load")
	require.Equal(t, [2]int64{20, 4}, peerLoad(tr, honestEP))
	requirePendingBytesConsistent(t, a)
	a.Close()
}

// Taking an endpoint out of the set forgets the peers' pending changes
// naming it, and their bytes leave the count of the peer that sent them as
// well as the total. Before, only the total lost them: when that peer was
// later evicted as the one over its share, its stale count was subtracted
// again, the total went negative and MaxPendingDeltaBytes stopped bounding
// the changes held.
func TestRemovedEndpointsChangesLeaveTheirPeersByteCount(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghosts and the replica, which Cleanup stops first
	const epX, epY, epZ = "10.0.0.11:8000", "10.0.0.12:8000", "10.0.0.13:8000"
	db := deltaBytes(epX)
	flood, honest, a, tr := startFloodAndHonest(t, 4*db)

	x := delta{endpoint: epX, tokens: 1, requests: 1}
	flood.publish(11, x, x, x, x)
	awaitPeerLoad(t, tr, epX, [2]int64{4, 4})
	require.Equal(t, 4*db, a.PendingDeltaBytes())
	requirePendingBytesConsistent(t, a)

	// epX leaves the endpoint set: flood's pending changes on it are forgotten.
	var keep []string
	for _, id := range testEndpointIDs() {
		if id != epX {
			keep = append(keep, id)
		}
	}
	reads := a.Stats().Reads
	a.SetEndpoints(keep)
	require.Zero(t, a.PendingDeltaBytes())
	requirePendingBytesConsistent(t, a)
	require.Eventually(t, func() bool { return a.Stats().Reads > reads }, deltaWait, time.Millisecond)

	y := delta{endpoint: epY, tokens: 1, requests: 1}
	flood.publish(15, y, y, y, y)
	awaitPeerLoad(t, tr, epY, [2]int64{4, 4})
	require.Equal(t, 4*db, a.PendingDeltaBytes(), "the bound is full with flood's four changes on epY")
	requirePendingBytesConsistent(t, a)

	// honest is within its share: flood, over its share, loses its changes.
	honest.publish(11, delta{endpoint: epZ, tokens: 5, requests: 1})
	awaitPeerLoad(t, tr, epZ, [2]int64{5, 1})
	require.Equal(t, [2]int64{}, peerLoad(tr, epY), "flood's changes were evicted")
	require.Equal(t, db, a.PendingDeltaBytes(), "honest's one change is what is held")
	requirePendingBytesConsistent(t, a)

	// The bound still holds: of honest's next seven changes three fit and
	// fill it; the other four are dropped, honest being then over its share.
	dropped := testutil.ToFloat64(a.met.deltasDropped[deltaDropMemory])
	z := delta{endpoint: epZ, tokens: 1, requests: 1}
	honest.publish(12, z, z, z, z, z, z, z)
	awaitMemoryDrops(t, a, dropped+4)
	require.Equal(t, [2]int64{8, 4}, peerLoad(tr, epZ))
	require.Equal(t, 4*db, a.PendingDeltaBytes(), "never over MaxPendingDeltaBytes")
	requirePendingBytesConsistent(t, a)
	a.Close()
}

// A load change that arrives as the replica enters degraded mode, whose
// views of the peers' load are cleared then, is not applied after them: the
// replica routes on local load only for the whole outage, and a dispatch
// applied then would weigh on its endpoint until Redis answers again,
// its end never arriving.
func TestLoadChangeRacingAnOutageIsNotAppliedAfterIt(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghosts and the replica, which Cleanup stops first
	const ep = "10.0.0.9:8000"
	_, a, tr := startGhostPeer(t, 100, nil)
	a.testHookApplyDelta = func() { a.result(opRead, errors.New("Redis went away")) } // the read loop's outage, just then
	a.applyDelta([]byte("ghost"), []byte(ep), 101, 500, 1)
	a.testHookApplyDelta = nil
	require.True(t, a.Degraded())
	require.Equal(t, [2]int64{}, peerLoad(tr, ep), "local load only while degraded")
	require.Zero(t, a.PendingDeltaBytes())
	require.Equal(t, 1.0, testutil.ToFloat64(a.met.deltasDropped[deltaDropDegraded]), "the change is counted as dropped")
	a.Close()
}
