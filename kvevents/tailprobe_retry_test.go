package kvevents

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/replay"
	"github.com/kvroute/kvroute/telemetry"
)

// A tail probe that falls due while a replay is still running (its last
// batch applied, its END not yet in) is tried again later instead of being
// dropped: before, nothing re-armed it, so a tail lost after that replay
// stayed lost until the engine's next message, however long it idled.
func TestTailProbeDueDuringReplayIsRetried(t *testing.T) {
	defer leakcheck.Check(t)()
	gate := make(chan struct{})
	addr, stop := startGatedRouter(t, 6, 1<<32, gate) // batches up to 5, then holds END
	defer stop()

	clock := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	f := newClockSeqFixture(t, PoolConfig{TailProbeDelay: time.Second}, addr, clock)
	logs := f.logs
	defer f.close()

	f.publish(0, 0) // the connect replay ends at the live message
	waitAppliedLogs(t, f.p, seqID, 0, logs)
	require.Eventually(t, func() bool { return !f.status().Replaying }, poolWait, poolTick)
	clock.Advance(time.Second) // the first tail probe applies 1..5, then waits for END
	require.Eventually(t, func() bool { return f.held(5) }, poolWait, poolTick, "batch 5 not applied\n%s", logs.String())
	require.True(t, f.status().Replaying)
	armed := clock.Waiters()   // the tail probe's timer among them
	clock.Advance(time.Second) // the probe falls due during the replay
	require.Eventually(t, func() bool { return clock.Waiters() >= armed }, poolWait, poolTick,
		"the probe that fell due during the replay was not armed again")
	close(gate)
	require.Eventually(t, func() bool { return !f.status().Replaying }, poolWait, poolTick)

	clock.Advance(time.Second)
	require.Eventually(t, func() bool { return counter(f.p.sm.Probes, seqID, probeEmpty) >= 1 }, poolWait, poolTick,
		"no tail probe after the replay\n%s", logs.String())
}

// A tail probe that falls due while the stream cools down after a failed
// replay is tried again when the cooldown is over, instead of being dropped
// until the engine's next message.
func TestTailProbeDueDuringCooldownIsRetried(t *testing.T) {
	defer leakcheck.Check(t)()
	clock := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	f := newClockSeqFixture(t, PoolConfig{ReplayCooldown: 30 * time.Second, TailProbeDelay: time.Second,
		ReplayClient: replay.ClientConfig{MaxAttemptsWithoutProgress: 1, Backoff: time.Millisecond}},
		refusingAddr(t), clock)
	logs := f.logs
	defer f.close()

	f.publish(0, 0) // the connect replay fails: cooling down for 30 s
	f.wait(0)
	require.Eventually(t, func() bool { return f.count("replays", replayFailed) == 1 && !f.status().Replaying },
		poolWait, poolTick, logs.String())
	armed := clock.Waiters()   // the tail probe's timer among them
	clock.Advance(time.Second) // the probe falls due while cooling down
	require.Eventually(t, func() bool { return clock.Waiters() >= armed }, poolWait, poolTick,
		"the probe that fell due during the cooldown was not armed again")
	clock.Advance(29 * time.Second)
	require.Eventually(t, func() bool { return counter(f.p.sm.Probes, seqID, probeFailed) >= 1 }, poolWait, poolTick,
		"no tail probe after the cooldown\n%s", logs.String())
}
