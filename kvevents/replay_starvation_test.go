package kvevents

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/replay"
)

// hogSlots fills every slot of lim with replays of a silent router that
// hold them until release is called.
func hogSlots(t *testing.T, lim *replay.Limiter) (release func()) {
	t.Helper()
	slow, stop := startSilentRouter(t)
	hog, err := replay.NewClient(replay.ClientConfig{Limiter: lim, IdleTimeout: time.Minute}, replay.Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, lim.Size())
	for range lim.Size() {
		go func() {
			defer func() { done <- struct{}{} }()
			_, _ = hog.Replay(ctx, slow, 0, func(uint64, []byte) error { return nil })
		}()
	}
	require.Eventually(t, func() bool { return lim.InFlight() == lim.Size() }, poolWait, poolTick)
	released := false
	return func() {
		if released {
			return
		}
		released = true
		cancel()
		for range lim.Size() {
			<-done
		}
		stop()
	}
}

// Eight hostile replay sockets hold every process-wide replay slot. A fresh
// engine's first live message is the start of its join replay (0): the
// replay is cut short once the live messages have waited the grace, and the
// live stream is applied. Before, the cut-short check needed the live
// messages to be past the replay's start, and nothing was applied until the
// replay's 2-minute deadline.
func TestStreamFreshEndpointStarvedOfSlotsAppliesLive(t *testing.T) {
	defer leakcheck.Check(t)()
	lim := replay.NewLimiter(8)
	release := hogSlots(t, lim)
	defer release()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1, ReplayClient: replay.ClientConfig{Limiter: lim}}, 100, "")
	defer f.close()
	for s := range uint64(11) {
		f.publish(s, s) // 0 starts the join replay from 0, which waits for a slot
	}
	waitAppliedLogs(t, f.p, seqID, 10, f.logs)
	requireHeld(t, f.ix, seqID, 0, 10)
	require.Equal(t, 1.0, f.count("replays", replayCutShort), f.logs.String())
	require.False(t, f.status().Degraded, "nothing was missed")
	release()
	f.publish(11, 11)
	f.wait(11)
}

// The same starvation for an engine with history: 50 batches published
// before the router subscribed, then live messages from 50. The live stream
// is applied once the grace is over, the 50 earlier batches are recorded as
// missing (degraded), and when a slot frees a rebuild recovers them without
// holding the live stream while it waited. Before, the 50 batches were lost
// for good.
func TestStreamEndpointStarvedOfSlotsRecoversHistoryWhenSlotFrees(t *testing.T) {
	defer leakcheck.Check(t)()
	lim := replay.NewLimiter(8)
	release := hogSlots(t, lim)
	defer release()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1, ReplayClient: replay.ClientConfig{Limiter: lim}}, 200, "")
	defer f.close()
	for s := range uint64(50) {
		f.hide(s, s) // published before the router subscribed
	}
	for s := uint64(50); s <= 60; s++ {
		f.publish(s, s) // 50 starts the join replay from 0, which waits for a slot
	}
	waitAppliedLogs(t, f.p, seqID, 60, f.logs)
	requireHeld(t, f.ix, seqID, 50, 60)
	require.Equal(t, 1.0, f.count("replays", replayCutShort), f.logs.String())
	require.True(t, f.status().Degraded, "batches 0..49 are missing")
	f.publish(61, 61) // the live stream keeps flowing while the rebuild waits
	f.wait(61)
	require.False(t, f.held(0))

	release() // a slot frees
	require.Eventually(t, func() bool { return f.held(0) && !f.status().Degraded }, poolWait, poolTick, f.logs.String())
	f.publish(62, 62)
	f.wait(62)
	requireHeld(t, f.ix, seqID, 0, 62)
	require.Contains(t, f.logs.String(), "Rebuild has its replay slot")
}
