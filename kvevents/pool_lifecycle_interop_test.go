package kvevents

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/replay"
)

// lifeTokens are the tokens of batch seq in the Python publisher's engine
// lifetime life (see testdata/vllm_publisher.py).
func lifeTokens(seq uint64, life int) []uint32 {
	toks := make([]uint32, poolBlocks*poolBlockSize)
	for i := range toks {
		toks[i] = uint32((seq*7919 + uint64(life)*104729 + uint64(i)) % 50000)
	}
	return toks
}

func lifeHeld(ix *kvindex.Index, id string, seq uint64, life int) int {
	keys := kvindex.Keys(nil, lifeTokens(seq, life), poolBlockSize, &kvindex.KeyParams{Model: poolModel})
	var res kvindex.MatchResult
	ix.Match(keys, []string{id}, &res)
	return res.Endpoints()[0].Blocks
}

// vLLM main as read: map-shaped outer batches and the 4-frame replay reply
// (no topic frame), with an engine that is idle when the router starts and
// whose model is configured nowhere but in its topic. The batches published
// before the router started arrive through the connect replay, keyed under
// the pool's default model (none here); the first live message names the
// model, and they are replayed again under it.
func TestPoolInteropVLLMMainIdleEngine(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	py := pytest.Start(t, pytest.Config{Replay: true, Layout: "legacy", BatchShape: "map"})
	defer py.Stop()
	early := pyPublish(t, py, 4) // then idle
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: pyID, EventsAddress: py.PubAddr, ReplayAddress: py.ReplayAddr}))
	require.Eventually(t, func() bool {
		st, _ := p.Status(pyID)
		return !st.Replaying && logs.count("Replay complete") >= 1
	}, poolWait, poolTick, logs.String())
	require.Zero(t, heldBlocks(ix, pyID, 0), "not under the topic's model before the topic is known")
	last := pyPublishUntilReceived(t, p, py, pyID, early+1)
	waitAppliedLogs(t, p, pyID, last, logs)
	requireHeldLogs(t, ix, pyID, 0, last, logs)
	require.Contains(t, logs.String(), "layout=legacy")
	require.Zero(t, counter(p.metrics().Dropped, pyID, string(dropDecodeError)), "map-shaped batches decode")
	require.GreaterOrEqual(t, counter(p.metrics().Dropped, pyID, string(dropModelMismatch)), float64(early+1),
		"the batches keyed under the default model are counted when cleared")
}

// A libzmq engine restarts on the same ports and publishes before the
// subscriber re-dials, then goes idle, with its new sequence already past
// the old watermark: only the reconnect check's digest comparison can tell.
// The old lifetime's blocks go, the new lifetime's are indexed. The ports
// lie outside the ephemeral range (testport), so no other socket takes them
// while the publisher rebinds.
func TestPoolInteropFastRestartPastWatermark(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	py := pytest.Start(t, pytest.Config{Replay: true, PubPort: testport.Port(t), ReplayPort: testport.Port(t)})
	defer py.Stop()
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{MinBackoff: 200 * time.Millisecond}, ix)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: pyID, EventsAddress: py.PubAddr, ReplayAddress: py.ReplayAddr}))
	old := pyPublishUntilReceived(t, p, py, pyID, 0)
	waitAppliedLogs(t, p, pyID, old, logs)
	_, last, ok, err := py.Restart(int(old) + 6) // past the old watermark, before the re-dial
	require.NoError(t, err)
	require.True(t, ok)
	m := p.metrics()
	require.Eventually(t, func() bool { return counter(m.PublisherRestarts, pyID) == 1 }, poolWait, poolTick,
		"restart not detected: %s", logs)
	waitAppliedLogs(t, p, pyID, last, logs)
	for s := uint64(0); s <= last; s++ {
		require.Equal(t, poolBlocks, lifeHeld(ix, pyID, s, 1), "batch %d of the new lifetime\n%s", s, logs)
	}
	for s := uint64(0); s <= old; s++ {
		require.Zero(t, lifeHeld(ix, pyID, s, 0), "batch %d of the old lifetime survived", s)
	}
	require.Contains(t, logs.String(), "Publisher restarted while disconnected")
}

// PUB high-water-mark drops at the end of a burst, then an idle engine:
// the tail probe repairs the lost tail shortly after the stream goes quiet.
// With HWM 1 and a 300-batch burst libzmq drops what the subscriber has not
// taken; whatever was dropped (mid-burst gaps or the tail) is repaired.
func TestPoolInteropHWMBurstThenIdle(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	py := pytest.Start(t, pytest.Config{Replay: true, HWM: 1})
	defer py.Stop()
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: pyID, EventsAddress: py.PubAddr, ReplayAddress: py.ReplayAddr}))
	pyPublishUntilReceived(t, p, py, pyID, 0)
	_, last, err := py.Burst(300)
	require.NoError(t, err)
	burst := time.Now()
	_, _, err = py.Hide(2) // and the last two certainly lost on the wire
	require.NoError(t, err)
	last += 2
	waitAppliedLogs(t, p, pyID, last, logs)
	t.Logf("burst of 300 with HWM 1, last 2 lost: all applied %v after the burst; gaps %v, probes repaired %v",
		time.Since(burst), counter(p.metrics().SequenceGaps, pyID), counter(p.sm.Probes, pyID, probeRepaired))
	requireHeldLogs(t, ix, pyID, 0, last, logs)
	require.GreaterOrEqual(t, counter(p.sm.Probes, pyID, probeRepaired), 1.0)
}

// A replay socket that never sends END and answers two batches an attempt
// (vLLM's ROUTER cut off mid-reply, again and again): the held live message
// is applied as soon as the replay has covered up to it, and the replay then
// ends as complete instead of running out of attempts. Before, the endpoint
// waited for the replay to fail (replays_total{result="failed"}) and then
// cooled down.
func TestPoolInteropEndlessPartialReplayCoveredThenLive(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	py := pytest.Start(t, pytest.Config{Replay: true})
	defer py.Stop()
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{TailProbeDelay: -1,
		ReplayClient: replay.ClientConfig{IdleTimeout: 300 * time.Millisecond}}, ix)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: pyID, EventsAddress: py.PubAddr, ReplayAddress: py.ReplayAddr}))
	base := pyPublishUntilReceived(t, p, py, pyID, 0)
	waitAppliedLogs(t, p, pyID, base, logs)
	_, _, err := py.Hide(4)
	require.NoError(t, err)
	_, err = py.Command("replay-mode partial 2")
	require.NoError(t, err)
	last := pyPublish(t, py, 1) // reveals the gap; held while the replay runs
	waitAppliedLogs(t, p, pyID, last, logs)
	m := p.metrics()
	require.Zero(t, counter(m.Replays, pyID, replayFailed), logs.String())
	require.GreaterOrEqual(t, counter(m.Replays, pyID, replayComplete), 2.0, logs.String())
	requireHeldLogs(t, ix, pyID, 0, last, logs)
	next := pyPublish(t, py, 3) // live again at once
	waitAppliedLogs(t, p, pyID, next, logs)
}

// An SGLang fleet with replay enabled pool-wide: the libzmq engine has no
// replay socket and the endpoints say so; messages flow, gaps are counted,
// and no replay error or failed replay appears.
func TestPoolInteropSGLangNoReplayNoise(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	py := pytest.Start(t, pytest.Config{})
	defer py.Stop()
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{Replay: true}, ix)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: pyID, Engine: EngineSGLang, EventsAddress: py.PubAddr}))
	pyPublishUntilReceived(t, p, py, pyID, 0)
	_, _, err := py.Hide(1)
	require.NoError(t, err)
	last := pyPublish(t, py, 3)
	waitAppliedLogs(t, p, pyID, last, logs)
	m := p.metrics()
	require.Equal(t, 1.0, counter(m.SequenceGaps, pyID))
	for _, op := range []string{replay.OpConnect, replay.OpNoProgress, replay.OpIncomplete, replay.OpCapacity} {
		require.Zero(t, counter(m.ZMQErrors, pyID, op), op)
	}
	require.Zero(t, counter(m.Replays, pyID, replayFailed))
	require.NotContains(t, logs.String(), "Replay failed")
}

// SGLang's publisher serves replays on its replay_endpoint, in the reply
// layout vLLM had before vllm#45177 (no topic frame): an SGLang endpoint
// given that address replays what it missed before subscribing and a gap
// on the wire, instead of leaving holes. Before, a replay address on an
// SGLang endpoint was refused (the engine was taken to have no replay
// socket), so the endpoint could not even be added with it.
func TestPoolInteropSGLangReplaysFromItsReplaySocket(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	py := pytest.Start(t, pytest.Config{Replay: true, Layout: "legacy"})
	defer py.Stop()
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	early := pyPublish(t, py, 3) // before anyone subscribed
	require.NoError(t, p.Ensure(Endpoint{ID: pyID, Engine: EngineSGLang, EventsAddress: py.PubAddr, ReplayAddress: py.ReplayAddr}))
	waitAppliedLogs(t, p, pyID, pyPublishUntilReceived(t, p, py, pyID, early+1), logs)
	_, _, err := py.Hide(2) // lost on the wire, kept for replay
	require.NoError(t, err)
	last := pyPublish(t, py, 3)
	waitAppliedLogs(t, p, pyID, last, logs)
	requireHeldLogs(t, ix, pyID, 0, last, logs)
	m := p.metrics()
	require.GreaterOrEqual(t, counter(m.SequenceGaps, pyID), 1.0)
	require.GreaterOrEqual(t, counter(m.Replays, pyID, replayComplete), 2.0, logs.String())
	require.Zero(t, counter(m.Replays, pyID, replayFailed))
	require.Contains(t, logs.String(), "layout=legacy")
}

// The revisions with a topic frame in the replay reply: an idle engine whose
// model only its topic names is indexed by the connect replay alone.
func TestPoolInteropModelFromReplayTopic(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	py := pytest.Start(t, pytest.Config{Replay: true, Layout: "current", BatchShape: "map"})
	defer py.Stop()
	early := pyPublish(t, py, 4) // then idle
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: pyID, EventsAddress: py.PubAddr, ReplayAddress: py.ReplayAddr}))
	waitAppliedLogs(t, p, pyID, early, logs)
	requireHeldLogs(t, ix, pyID, 0, early, logs)
	require.Zero(t, counter(p.metrics().MessagesReceived, pyID), "nothing arrived live")
}

// A libzmq replay socket answering a gap with a batch at sequence 2^62: the
// batch is rejected as a protocol error, the watermark stays with the live
// stream and later live messages are applied (before, all of them were
// skipped without a counter).
func TestPoolInteropBogusReplaySequenceRejected(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	py := pytest.Start(t, pytest.Config{Replay: true})
	defer py.Stop()
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{TailProbeDelay: -1}, ix)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: pyID, EventsAddress: py.PubAddr, ReplayAddress: py.ReplayAddr}))
	base := pyPublishUntilReceived(t, p, py, pyID, 0)
	waitAppliedLogs(t, p, pyID, base, logs)
	_, err := py.Command("skip 1") // a lost batch the buffer does not hold
	require.NoError(t, err)
	_, err = py.Command("bogus 4611686018427387904")
	require.NoError(t, err)
	_, err = py.Command("replay-mode normal")
	require.NoError(t, err)
	// The buffer now ends at 2^62; live sequences go on from base+2.
	last := pyPublish(t, py, 3)
	m := p.metrics()
	require.Eventually(t, func() bool { return counter(m.ZMQErrors, pyID, opReplayProtocol) >= 1 },
		poolWait, poolTick, logs.String())
	require.Eventually(t, func() bool {
		st, _ := p.Status(pyID)
		return st.HasApplied && st.Applied == last && !st.Replaying
	}, poolWait, poolTick, logs.String())
	require.True(t, lifeHeld(ix, pyID, last, 0) == poolBlocks, "the live stream is indexed")
}
