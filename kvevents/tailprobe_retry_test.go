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

	start := time.Unix(1_700_000_000, 0)
	clock := telemetry.NewManual(start)
	f := newClockSeqFixture(t, PoolConfig{TailProbeDelay: time.Second}, addr, clock)
	logs := f.logs
	defer f.close()

	f.publish(0, 0) // the connect replay ends at the live message
	waitAppliedLogs(t, f.p, seqID, 0, logs)
	require.Eventually(t, func() bool { return !f.status().Replaying }, poolWait, poolTick)
	clock.Advance(time.Second) // the first tail probe applies 1..5, then waits for END
	require.Eventually(t, func() bool { return f.held(5) }, poolWait, poolTick, "batch 5 not applied\n%s", logs.String())
	require.True(t, f.status().Replaying)
	// Batch 5's arrival armed the next probe for start+2s; it falls due
	// during the replay and must be armed again a probe delay later.
	require.Eventually(t, func() bool { return clock.Armed(start.Add(2 * time.Second)) }, poolWait, poolTick)
	clock.Advance(time.Second)
	require.Eventually(t, func() bool { return clock.Armed(start.Add(3 * time.Second)) }, poolWait, poolTick,
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
	start := time.Unix(1_700_000_000, 0)
	clock := telemetry.NewManual(start)
	f := newClockSeqFixture(t, PoolConfig{ReplayCooldown: 30 * time.Second, TailProbeDelay: time.Second,
		ReplayClient: replay.ClientConfig{MaxAttemptsWithoutProgress: 1, Backoff: time.Millisecond}},
		refusingAddr(t), clock)
	logs := f.logs
	defer f.close()

	f.publish(0, 0) // the connect replay fails: cooling down for 30 s
	f.wait(0)
	require.Eventually(t, func() bool { return f.count("replays", replayFailed) == 1 && !f.status().Replaying },
		poolWait, poolTick, logs.String())
	// The message armed the tail probe for start+1s; it falls due while the
	// stream cools down (until start+30s) and must be armed again for the
	// cooldown's end. Counting the clock's waiters could not tell that apart
	// from another timer firing or stopping meanwhile, and failed on a
	// loaded machine.
	require.Eventually(t, func() bool { return clock.Armed(start.Add(time.Second)) }, poolWait, poolTick)
	clock.Advance(time.Second)
	require.Eventually(t, func() bool { return clock.Armed(start.Add(30 * time.Second)) }, poolWait, poolTick,
		"the probe that fell due during the cooldown was not armed again for the cooldown's end")
	clock.Advance(29 * time.Second)
	require.Eventually(t, func() bool { return counter(f.p.sm.Probes, seqID, probeFailed) >= 1 }, poolWait, poolTick,
		"no tail probe after the cooldown\n%s", logs.String())
}
