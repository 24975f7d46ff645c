package kvevents

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/replay"
)

// heldCount is the number of live messages the stream holds.
func (f *seqFixture) heldCount() int {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	return len(f.st.s.held)
}

// Live messages held for a replay that a Resync supersedes are discarded
// with it (the Resync's replay from 0 rebuilds the endpoint): each one is
// counted (dropped_total{reason="superseded"}). Before, they vanished
// without a trace in any metric.
func TestStreamHeldMessagesOfASupersededReplayAreCounted(t *testing.T) {
	defer leakcheck.Check(t)()
	raddr, accepted, stop := startSilentPeer(t)
	defer stop()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1, ReplayGrace: time.Hour,
		ReplayClient: replay.ClientConfig{IdleTimeout: time.Hour}}, 0, raddr)
	defer f.close()
	for s := uint64(0); s < 3; s++ {
		f.publish(s, s) // 0 starts the connect replay, which gets no answer: all three are held
	}
	await(t, accepted, "the connect replay's connection")
	require.Eventually(t, func() bool { return f.heldCount() == 3 }, poolWait, poolTick, f.logs.String())
	require.Zero(t, f.count("dropped", string(dropSuperseded)))
	require.NoError(t, f.p.Resync(seqID)) // returns once the new generation began
	require.Equal(t, 3.0, f.count("dropped", string(dropSuperseded)), f.logs.String())
	require.Zero(t, f.heldCount())
}
