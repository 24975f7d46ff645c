package kvevents

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/replay"
	"github.com/kvroute/kvroute/telemetry"
)

// A snapshot socket that accepts the connect load's request and never
// answers, on the pool's clock: once the live messages held for the load
// have waited as long as a replay of the same range may keep them
// (ReplayGrace plus one second per ReplayMinRate batches), the load is
// abandoned, counted (snapshot_errors_total{reason="stalled"}, a failed
// load; the attempt it interrupted is not the engine's error), and the
// replay rebuilds the endpoint as after a failed fetch. Before, only the
// client's overall timeout (2 minutes by default) ended it, and the live
// stream stayed held until the hold was full.
func TestStreamStalledSnapshotLoadAbandoned(t *testing.T) {
	defer leakcheck.Check(t)()
	start := time.Unix(1_700_000_000, 0)
	clock := telemetry.NewManual(start)
	buf := replay.NewBuffer(100)
	srv, err := replay.NewServer(replay.ServerConfig{Addr: "127.0.0.1:0"}, buf, replay.Options{})
	require.NoError(t, err)
	saddr, accepted, stopS := startSilentPeer(t)
	defer stopS()
	const grace = time.Second
	f := newClockSeqFixture(t, PoolConfig{TailProbeDelay: -1, ReplayGrace: grace}, srv.Endpoint(), clock)
	f.buf, f.srv = buf, srv
	defer f.close()
	f.useSnapshotClient(saddr, snapshot.ClientConfig{AttemptTimeout: time.Hour, Timeout: time.Hour})
	for s := uint64(0); s < 5; s++ {
		f.hide(s, s) // published before the router joined
	}
	for s := uint64(5); s < 8; s++ {
		f.publish(s, s) // 5 starts the connect load; 5..7 are held for it
	}
	await(t, accepted, "the snapshot request's connection")
	require.Eventually(t, func() bool { return f.heldCount() == 3 }, poolWait, poolTick, f.logs.String())
	require.Equal(t, string(phaseSnapshot), f.status().Phase)
	// The watchdog's ticker is armed (its first tick at grace/8); past the
	// allowance of 5 batches (grace + 50 ms) it abandons the load.
	require.Eventually(t, func() bool { return clock.Armed(start.Add(grace / 8)) }, poolWait, poolTick)
	clock.Advance(2 * grace)
	f.wait(7)
	requireHeld(t, f.ix, seqID, 0, 7)
	require.Equal(t, 1.0, counter(f.p.snm.errors, seqID, snapStalled), f.logs.String())
	require.Equal(t, 1.0, seriesSum(f.p.snm.errors, seqID), "the interrupted attempt is not counted too")
	require.Equal(t, 1.0, f.snapCount(snapFailed))
	require.Zero(t, f.count("dropped", string(dropHoldFull)))
	require.Equal(t, sourceReplay, f.status().IndexSource)
	require.Equal(t, 1, f.logs.count("Engine snapshot stalled"), f.logs.String())
}
