package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/kvindex"
)

// Decisions a replica receives but does not apply are counted by reason: a
// decision with no keys (no_keys), and one under the replica's own ID in a
// message that is not its echo (own_sender): a version-1 header, or the ID's
// length not in its shortest form. The replica's own echoes are not counted.
func TestReceivedDecisionsNotAppliedAreCounted(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	x, pub := dropTarget(t, srv.Addr)
	keys := []kvindex.Key{1, 2, 3}

	pub(appendDecision(appendDecisionHeader(nil, "ghost", 1), known, nil)) // no keys
	pub(appendDecision(appendDecision(appendDecisionHeader(nil, "ghost", 2), known, nil), known, nil))
	v1 := append(appendStr([]byte{decisionMagic, wireVersion1}, "a"), 1)
	pub(appendDecision(v1, known, keys))
	long := []byte{decisionMagic, wireVersion, 0x81, 0x00, 'a', 1} // "a", its length 1 as a two-byte varint
	pub(appendDecision(long, known, keys))
	x.r.Publish(known, keys) // its own, echoed back to it
	require.Eventually(t, func() bool { return x.r.Stats().Published == 1 }, deltaWait, time.Millisecond)
	pub(appendDecision(appendDecisionHeader(nil, "ghost", 1), known, keys)) // the marker, applied
	require.Eventually(t, func() bool { return x.r.Stats().Applied >= 1 }, deltaWait, time.Millisecond)

	require.EqualValues(t, 1, x.r.Stats().Applied, "the marker alone is applied")
	require.Equal(t, 3, x.ix.Stats().Speculative)
	drops := func(reason string) float64 {
		return counter(t, x.reg, "kvroute_cluster_decisions_dropped_total", map[string]string{"reason": reason})
	}
	require.EqualValues(t, 3, drops("no_keys"))
	require.EqualValues(t, 2, drops("own_sender"), "the forged ones; the replica's echo is not counted")
	require.Zero(t, counter(t, x.reg, "kvroute_cluster_invalid_messages_total", nil))
	require.Zero(t, counter(t, x.reg, "kvroute_cluster_endpoints_dropped_total", map[string]string{"reason": "unknown_endpoint"}))
	x.r.Close()
}

// A load change under the replica's own ID in a message it did not head
// (its length in a longer varint than its own header writes: a forged or
// broken sender) is dropped and counted own_sender, not applied as a
// peer's load nor skipped silently; the ghost's change beside it is
// applied.
func TestReceivedOwnLoadChangesAreCounted(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	x, pub := dropTarget(t, srv.Addr)

	long := []byte{decisionMagic, wireVersion, 0x81, 0x00, 'a', 0} // "a", its length as a two-byte varint, no decisions
	pub(appendDeltas(long, 1, []delta{{endpoint: known, tokens: 5000, requests: 3}}))
	pub(appendDeltas(appendDecisionHeader(nil, "ghost", 0), 2, []delta{{endpoint: known, tokens: 700, requests: 1}}))
	drops := func(reason string) float64 {
		return counter(t, x.reg, "kvroute_cluster_load_changes_dropped_total", map[string]string{"reason": reason})
	}
	require.Eventually(t, func() bool { return drops("own_sender") == 1 }, deltaWait, time.Millisecond)
	require.Zero(t, counter(t, x.reg, "kvroute_cluster_invalid_messages_total", nil))
	x.r.Close()
}

// dropTarget is a replica (ID "a") beside a ghost peer that has recorded
// itself, and pub, which publishes a raw message on the pool's channel as
// the ghost.
func dropTarget(t *testing.T, addr string) (hostileTarget, func([]byte)) {
	t.Helper()
	g := newGhost(t, addr)
	g.record(1, time.Hour)
	x := newHostileTarget(t, addr)
	return x, func(msg []byte) { require.NoError(t, g.rdb.Publish(context.Background(), g.keys.channel, msg).Err()) }
}
