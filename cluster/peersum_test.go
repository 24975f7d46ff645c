package cluster

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
)

// The wire accepts a peer's load up to 2⁶² per endpoint in a record and
// changes of up to ±2⁶² each, so a read's sum over several peers (records,
// changes above them, changes of a peer not listed yet) exceeds the int64
// range. It saturates, as the tracker's own sum of the changes does: it
// used to wrap to a negative sum, which the tracker counts as no load, and
// the most loaded endpoint looked idle.
func TestPeerLoadSumOverPeersSaturates(t *testing.T) {
	t.Cleanup(leakcheck.Check(t)) // after the server, the ghosts and the replica, which Cleanup stops first
	const inRecords, aboveRecord, unlisted = "10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"
	const bound = 1 << 62
	full := [2]int64{math.MaxInt64, math.MaxInt64}
	srv := redistest.Start(t)
	newNamedGhost(t, srv.Addr, "g1").record(1, time.Hour, EndpointLoad{Endpoint: inRecords, Tokens: bound, Requests: bound})
	newNamedGhost(t, srv.Addr, "g2").record(1, time.Hour, EndpointLoad{Endpoint: inRecords, Tokens: bound, Requests: bound})
	g3 := newNamedGhost(t, srv.Addr, "g3")
	g3.record(1, time.Hour)
	a, tr := quietReplica(t, srv.Addr, "a", nil)
	require.Equal(t, full, peerLoad(tr, inRecords), "two records at the bound")

	g3.publish(2, delta{endpoint: aboveRecord, tokens: bound, requests: bound}, delta{endpoint: aboveRecord, tokens: bound, requests: bound})
	awaitPeerLoad(t, tr, aboveRecord, full, "the changes as they arrive: %v", peerLoad(tr, aboveRecord))
	late := newNamedGhost(t, srv.Addr, "late") // registers after the next read lists the members
	late.publish(1, delta{endpoint: unlisted, tokens: bound, requests: bound}, delta{endpoint: unlisted, tokens: bound, requests: bound})
	awaitPeerLoad(t, tr, unlisted, full, "the changes as they arrive: %v", peerLoad(tr, unlisted))

	a.read()
	require.Equal(t, full, peerLoad(tr, inRecords), "records")
	require.Equal(t, full, peerLoad(tr, aboveRecord), "changes above a record")
	require.Equal(t, full, peerLoad(tr, unlisted), "changes of a peer not listed yet")
	a.Close()
}
