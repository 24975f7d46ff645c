package kvevents

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// A batch published while the subscription is being set up (ZeroMQ's slow
// joiner: the publisher drops what it sends before it has the SUBSCRIBE)
// after the connect replay found the buffer empty is recovered by one join
// probe a TailProbeDelay later, even if the engine then idles: before it,
// nothing asked again, and an idle engine's first blocks stayed out of the
// index until its next batch. The test makes the loss certain: the
// endpoint's live socket is a publisher that never sends, its replay
// socket the engine's.
func TestJoinProbeRecoversBatchesTheSlowJoinerLost(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	const id = "127.0.0.1:8000"
	silent := newTestPublisher(t, zmqpub.Config{Endpoint: id, Model: poolModel})
	defer silent.Close()
	engine := newTestPublisher(t, zmqpub.Config{Endpoint: id, Model: poolModel, ReplayAddr: "127.0.0.1:0"})
	defer engine.Close()

	p, clock, logs := joinPool(t, ix, silent.Endpoint(), engine.ReplayEndpoint())
	defer p.Close()
	require.Eventually(t, func() bool {
		st, _ := p.Status(id)
		return counter(p.metrics().Replays, id, replayComplete) == 1 && !st.Replaying
	}, poolWait, poolTick, "the connect replay never ended\n%s", logs.String())
	require.Zero(t, counter(p.sm.Probes, id, probeEmpty), "the connect replay is no probe")

	last := publishN(t, engine, 3) // never reaches the subscriber
	require.Eventually(t, func() bool { return clock.Armed(joinStart.Add(time.Second)) }, poolWait, poolTick,
		"no join probe armed after an empty connect replay\n%s", logs.String())
	clock.Advance(time.Second)
	waitAppliedLogs(t, p, id, last, logs)
	requireHeld(t, ix, id, 0, last)
	require.Equal(t, 1.0, counter(p.sm.Probes, id, probeRepaired), logs.String())
	require.Zero(t, counter(p.metrics().MessagesReceived, id), "nothing arrived live")
}

// On an engine that stays idle and empty the join probe finds nothing,
// counts one empty probe, and is not armed again: an idle engine is not
// asked every TailProbeDelay forever. Like a tail probe it is a check on a
// stream with no sign of loss, so readiness stays live while it runs (its
// phase is replaying; the state's Since stays the connect replay's end): a
// router in front of idle engines does not turn not-ready a TailProbeDelay
// after each engine connects.
func TestJoinProbeOnAnEmptyEngineIsAskedOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	const id = "127.0.0.1:8000"
	engine := newTestPublisher(t, zmqpub.Config{Endpoint: id, Model: poolModel, ReplayAddr: "127.0.0.1:0"})
	defer engine.Close()
	p, clock, logs := joinPool(t, ix, engine.Endpoint(), engine.ReplayEndpoint())
	defer p.Close()
	require.Eventually(t, func() bool { return clock.Armed(joinStart.Add(time.Second)) }, poolWait, poolTick,
		"no join probe armed after an empty connect replay\n%s", logs.String())
	before, _ := p.Status(id)
	require.Equal(t, StateLive, before.State, logs.String())
	clock.Advance(time.Second)
	require.Eventually(t, func() bool {
		st, _ := p.Status(id)
		return counter(p.sm.Probes, id, probeEmpty) == 1 && !st.Replaying
	}, poolWait, poolTick, "the join probe never ended\n%s", logs.String())
	after, _ := p.Status(id)
	require.Equal(t, StateLive, after.State)
	require.Equal(t, before.Since, after.Since, "the probe took the stream out of live and back\n%s", logs.String())
	require.True(t, after.PhaseSince.After(before.PhaseSince), "the probe ran as a replay phase")
	st := p.stream(id)
	st.lock()
	armed := st.s.probeArmed
	st.unlock()
	require.False(t, armed, "a join probe that found nothing is not armed again")
	require.Equal(t, 1.0, counter(p.metrics().Replays, id, replayComplete), "the connect replay only")
}

// joinStart is the Manual clock's time in joinPool.
var joinStart = time.Unix(1_700_000_000, 0)

// joinPool is a pool on a Manual clock (at joinStart) with a tail probe
// delay of 1 s, subscribed to endpoint 127.0.0.1:8000 at events with its
// replay socket at replay.
func joinPool(t *testing.T, ix *kvindex.Index, events, replay string) (*Pool, *telemetry.Manual, *logBuffer) {
	t.Helper()
	clock := telemetry.NewManual(joinStart)
	logs := &logBuffer{}
	p, err := NewPool(PoolConfig{TailProbeDelay: time.Second}, ix,
		Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Logger: logs.logger(), Clock: clock}})
	require.NoError(t, err)
	require.NoError(t, p.Ensure(Endpoint{ID: "127.0.0.1:8000", Model: poolModel, EventsAddress: events, ReplayAddress: replay}))
	return p, clock, logs
}
