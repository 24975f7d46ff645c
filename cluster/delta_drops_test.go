package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
)

// A load change under the replica's own ID in a message it did not head
// (its length in a longer varint than its own header writes: a forged or
// broken sender) is dropped and counted own_sender, not applied as a
// peer's load nor skipped silently; the ghost's change beside it is
// applied.
func TestReceivedOwnLoadChangesAreCounted(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	g := newGhost(t, srv.Addr)
	g.record(1, time.Hour)
	x := newHostileTarget(t, srv.Addr) // replica ID "a"
	ctx := context.Background()
	pub := func(msg []byte) { require.NoError(t, g.rdb.Publish(ctx, g.keys.channel, msg).Err()) }

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
