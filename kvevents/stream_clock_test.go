package kvevents

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/replay"
	"github.com/kvroute/kvroute/telemetry"
)

// The replay cooldown, and the times phases and states begin, run on the
// pool's clock: with a Manual clock the cooldown ends exactly when the
// clock passes ReplayCooldown, however long the test takes on the wall.
func TestStreamCooldownRunsOnPoolClock(t *testing.T) {
	defer leakcheck.Check(t)()
	start := time.Unix(1_700_000_000, 0)
	clock := telemetry.NewManual(start)
	f := newClockSeqFixture(t, PoolConfig{ReplayCooldown: 30 * time.Second, TailProbeDelay: -1,
		ReplayClient: replay.ClientConfig{MaxAttemptsWithoutProgress: 1, Backoff: time.Millisecond}},
		refusingAddr(t), clock)
	logs := f.logs
	defer f.close()

	f.publish(0, 0) // the connect replay fails: cooling down, 0 is the base
	f.wait(0)
	require.Equal(t, 1.0, f.count("replays", replayFailed))
	require.Equal(t, start, f.status().PhaseSince, "every transition so far happened at the clock's start")
	f.publish(2, 2) // a gap while cooling down: no replay
	f.wait(2)
	require.Equal(t, 1.0, f.count("replays", replayFailed))

	clock.Advance(30 * time.Second)
	f.publish(4, 4) // the cooldown is over: the gap is replayed (and fails again)
	f.wait(4)
	require.Equal(t, 2.0, f.count("replays", replayFailed), logs.String())
	require.Equal(t, start.Add(30*time.Second), f.status().PhaseSince)
	require.Equal(t, string(phaseLive), f.status().Phase)
}

// newClockSeqFixture is newSeqFixture on the pool clock clock, its stream's
// replay socket at addr (no buffer of its own): for tests that time the
// stream's cooldowns and probes.
func newClockSeqFixture(t *testing.T, cfg PoolConfig, addr string, clock telemetry.Clock) *seqFixture {
	logs := &logBuffer{}
	f := &seqFixture{t: t, ix: newPoolIndex(t), logs: logs}
	if cfg.ReplayClient.Limiter == nil {
		cfg.ReplayClient.Limiter = replay.NewLimiter(8)
	}
	var err error
	f.p, err = NewPool(cfg, f.ix, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Logger: logs.logger(), Clock: clock}})
	require.NoError(t, err)
	f.p.mu.Lock()
	f.st = f.p.newStreamLocked(seqID, poolModel, addr)
	f.p.streams[seqID] = f.st
	f.p.mu.Unlock()
	return f
}

// refusingAddr is a replay address that refuses connections: nothing
// listens on it, and its port lies outside the ephemeral range (testport),
// so no other socket's bind to port 0 takes it and answers.
func refusingAddr(t *testing.T) string {
	t.Helper()
	return "tcp://" + testport.Addr(t)
}
