package kvevents

import (
	"context"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/replay"
	"github.com/kvroute/kvroute/telemetry"
)

// The last batches of a burst are lost on the wire (a publisher's HWM) and
// the engine goes idle: the tail probe asks the replay socket once the
// stream is quiet, and the tail is applied without any later live message.
// Before the probe nothing noticed until the idle deadline. The probe delay
// (1 s) is longer than any pause of the test between the batches it
// publishes, so the three lost batches are one tail, repaired by one probe.
func TestStreamLostTailRepairedByProbe(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: time.Second}, 100, "")
	defer f.close()
	for s := range uint64(5) {
		f.publish(s, s)
	}
	f.wait(4)
	lost := time.Now()
	for s := uint64(5); s <= 7; s++ {
		f.hide(s, s) // dropped by the PUB's HWM; the engine then idles
	}
	waitAppliedLogs(t, f.p, seqID, 7, f.logs)
	t.Logf("lost tail repaired %v after it was published (probe delay 1s)", time.Since(lost))
	requireHeld(t, f.ix, seqID, 0, 7)
	require.Equal(t, 1.0, counter(f.p.sm.Probes, seqID, probeRepaired))
	// Quiet again: one more probe finds nothing, and counts no replay.
	require.Eventually(t, func() bool { return counter(f.p.sm.Probes, seqID, probeEmpty) >= 1 }, poolWait, poolTick)
	require.Equal(t, uint64(8), f.status().Messages, "each batch applied once")
}

// An engine restarts and publishes before the subscriber re-dials, then
// goes idle: its new sequence numbers look like a continuation. The
// reconnect check replays from the watermark itself and compares the
// batch there with the digest of what was applied: a different payload is a
// restart, so the old lifetime's blocks go and the new one's are indexed.
// Before, the replay from applied+1 accepted the new lifetime's batches on
// top of the old blocks.
func TestStreamFastRestartDetectedByDigest(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 100, "")
	defer f.close()
	for s := range uint64(3) {
		f.publish(s, s)
	}
	f.wait(2)
	// The new process: sequences 0..5 with different batches (100+s),
	// published while the subscriber was away.
	f.buf.Reset()
	for s := range uint64(6) {
		f.hide(s, 100+s)
	}
	f.st.onConnect(false)
	waitAppliedLogs(t, f.p, seqID, 5, f.logs)
	require.Equal(t, 1.0, f.count("restarts"), f.logs.String())
	for b := range uint64(3) {
		require.False(t, f.held(b), "batch %d of the old lifetime survived", b)
	}
	for s := range uint64(6) {
		require.True(t, f.held(100+s), "batch %d of the new lifetime", s)
	}
	require.Contains(t, f.logs.String(), "Publisher restarted while disconnected")
	// The receiver starts over too: the new lifetime's next live message is
	// a continuation, not another restart.
	f.publish(6, 106)
	f.wait(6)
	require.Equal(t, 1.0, f.count("restarts"))
}

// The engine restarts while the subscriber is reconnecting (dial mode: in
// its backoff) and publishes past the old watermark before the re-dial; the
// stream's tail probe falls due meanwhile. The probe is the same check as a
// reconnect's: it replays from the watermark itself and compares the digest,
// so it finds the restart, and the old lifetime's blocks go. Before, it
// replayed from the next sequence unchecked and applied the new lifetime's
// batches on top of the old blocks; the reconnect check that followed then
// found its own (new) batch at the watermark, and the restart was never
// detected.
func TestStreamTailProbeWhileReconnectingDetectsRestart(t *testing.T) {
	defer leakcheck.Check(t)()
	buf := replay.NewBuffer(100)
	srv, err := replay.NewServer(replay.ServerConfig{Addr: "127.0.0.1:0"}, buf, replay.Options{})
	require.NoError(t, err)
	start := time.Unix(1_700_000_000, 0)
	clock := telemetry.NewManual(start)
	f := newClockSeqFixture(t, PoolConfig{TailProbeDelay: time.Second}, srv.Endpoint(), clock)
	f.buf, f.srv = buf, srv
	defer f.close()

	f.st.setConnected(true)
	for s := range uint64(3) {
		f.publish(s, s)
	}
	waitAppliedLogs(t, f.p, seqID, 2, f.logs)
	require.Eventually(t, func() bool { return clock.Armed(start.Add(time.Second)) }, poolWait, poolTick,
		"no tail probe armed after the traffic\n%s", f.logs)

	f.st.setConnected(false) // the engine went away; the subscriber backs off
	// The new process: sequences 0..5 with different batches (100+s),
	// published before the subscriber re-dials.
	f.buf.Reset()
	for s := range uint64(6) {
		f.hide(s, 100+s)
	}
	clock.Advance(time.Second) // the tail probe falls due while reconnecting
	waitAppliedLogs(t, f.p, seqID, 5, f.logs)

	// The subscriber re-dials: its reconnect check runs too.
	f.st.setConnected(true)
	f.st.onConnect(false)
	require.Eventually(t, func() bool { return counter(f.p.sm.Probes, seqID, probeEmpty) == 1 }, poolWait, poolTick,
		"the reconnect check did not run\n%s", f.logs)

	require.Equal(t, 1.0, f.count("restarts"), "restart not detected\n%s", f.logs)
	for b := range uint64(3) {
		require.False(t, f.held(b), "batch %d of the old lifetime survived\n%s", b, f.logs)
	}
	for s := range uint64(6) {
		require.True(t, f.held(100+s), "batch %d of the new lifetime", s)
	}
	require.Contains(t, f.logs.String(), "Publisher restarted while disconnected")
}

// A restarted engine still below the old watermark has no batch there: the
// reconnect check gets nothing where the old lifetime's batch must still be
// buffered, which is a restart too.
func TestStreamRestartBelowWatermarkDetectedOnReconnect(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 100, "")
	defer f.close()
	for s := range uint64(6) {
		f.publish(s, s)
	}
	f.wait(5)
	f.buf.Reset()
	for s := range uint64(2) {
		f.hide(s, 200+s)
	}
	f.st.onConnect(false)
	waitAppliedLogs(t, f.p, seqID, 1, f.logs)
	require.Equal(t, 1.0, f.count("restarts"), f.logs.String())
	require.False(t, f.held(5))
	require.True(t, f.held(200) && f.held(201))
}

// After a reconnect to the same engine lifetime, the check finds the batch
// at the watermark unchanged: batches published meanwhile are applied, and
// a check that finds nothing new counts as a probe, not as a replay.
func TestStreamReconnectCheckContinuesSameLifetime(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 100, "")
	defer f.close()
	for s := range uint64(3) {
		f.publish(s, s)
	}
	f.wait(2)
	replays := f.count("replays", replayComplete)
	f.st.onConnect(true) // a quiet recycle: nothing missed
	require.Eventually(t, func() bool { return counter(f.p.sm.Probes, seqID, probeEmpty) == 1 }, poolWait, poolTick)
	require.Equal(t, replays, f.count("replays", replayComplete), "an empty check is no replay")
	f.hide(3, 3)
	f.hide(4, 4)
	f.st.onConnect(false)
	waitAppliedLogs(t, f.p, seqID, 4, f.logs)
	require.Zero(t, f.count("restarts"))
	requireHeld(t, f.ix, seqID, 0, 4)
	require.Equal(t, uint64(5), f.status().Messages)
}

// A replay answering with a sequence far beyond anything the live stream
// has shown is rejected as a protocol error: the watermark stays, and later
// live messages are applied. Before, the watermark jumped to 2^62 and every
// later live message was skipped without a counter.
func TestStreamReplayBeyondLiveStreamRejected(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 100, "")
	defer f.close()
	for s := range uint64(5) {
		f.publish(s, s)
	}
	f.wait(4)
	f.hide(1<<62, 9)                           // the bogus batch the replay socket will answer
	f.st.receive(6, poolPayload(6), poolModel) // 5 is lost: gap, replay from 5
	waitAppliedLogs(t, f.p, seqID, 6, f.logs)
	require.Equal(t, 1.0, f.count("errors", opReplayProtocol), f.logs.String())
	f.st.receive(7, poolPayload(7), poolModel)
	f.wait(7)
	st := f.status()
	require.Equal(t, uint64(7), st.Applied, "the watermark follows the live stream")
	require.True(t, f.held(7))
	require.False(t, f.held(9), "the bogus batch was not applied")
}

// Before any live message a replay cannot be bounded by the live stream; the
// first live message then checks the watermark the replay left, and one far
// ahead of it is counted and dropped.
func TestStreamBogusConnectReplayCaughtByFirstLiveMessage(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 100, "")
	defer f.close()
	f.hide(1<<62, 9)
	f.st.onConnect(false)
	waitAppliedLogs(t, f.p, seqID, 1<<62, f.logs)
	f.publish(5, 5)
	// The watermark is already above 5: wait for the check itself.
	require.Eventually(t, func() bool { return f.count("errors", opReplayProtocol) == 1 }, poolWait, poolTick, f.logs.String())
	require.Eventually(t, func() bool { return f.status().Applied == 5 }, poolWait, poolTick, f.logs.String())
	require.True(t, f.held(5))
	require.False(t, f.held(9))
}

// Live messages at or below the watermark are counted, never skipped
// silently.
func TestStreamAlreadyAppliedCounted(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 0, "")
	defer f.close()
	f.publish(0, 0)
	f.publish(1, 1)
	f.wait(1)
	f.st.hasLive = false // the receiver lost its watermark (a restart it did not see)
	f.publish(1, 1)
	f.publish(2, 2)
	f.wait(2)
	require.Equal(t, 1.0, f.count("dropped", string(dropAlreadyApplied)))
}

// startSilentRouter is a replay socket that completes the handshake, reads
// requests and never answers.
func startSilentRouter(t *testing.T) (addr string, stop func()) {
	addr, _, stop = startSilentPeer(t)
	return addr, stop
}

// startSilentPeer is startSilentRouter (a replay or snapshot socket that
// never answers) that also signals each connection it accepts.
func startSilentPeer(t *testing.T) (addr string, accepted <-chan struct{}, stop func()) {
	l, err := zmqx.Listen(context.Background(), "127.0.0.1:0", zmq4.Router, zmqx.Options{}, nil)
	require.NoError(t, err)
	done := make(chan struct{})
	conns := make(chan *zmqx.Conn, 16)
	acc := make(chan struct{}, 16)
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns <- c
			select {
			case acc <- struct{}{}:
			default:
			}
		}
	}()
	return l.Endpoint(), acc, func() {
		_ = l.Close()
		<-done
		close(conns)
		for c := range conns {
			_ = c.Close()
		}
	}
}

// The process-wide replay slots are all held by a slow replay socket: the
// healthy endpoint's replay waits in the queue (wait time counted), and once
// live messages have waited longer than the grace the replay is cut short,
// counted, and the endpoint goes back to the live stream. Before, the
// endpoint stayed frozen (nothing applied, messages held, no metric moved)
// until the replay's 2-minute deadline.
func TestStreamReplayStarvedForSlotCutShort(t *testing.T) {
	defer leakcheck.Check(t)()
	lim := replay.NewLimiter(1)
	defer hogSlots(t, lim)()

	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1, ReplayGrace: 300 * time.Millisecond,
		ReplayClient: replay.ClientConfig{Limiter: lim}}, 100, "")
	defer f.close()
	f.st.s.has, f.st.s.needJoin = true, false // a warm endpoint at seq 0
	f.st.s.applied = 0
	f.hide(1, 1)
	for s := uint64(2); s <= 10; s++ {
		f.publish(s, s) // gap at 1: replay waits for the slot, live held
	}
	waitAppliedLogs(t, f.p, seqID, 10, f.logs)
	require.Equal(t, 1.0, f.count("replays", replayCutShort), f.logs.String())
	// kvroute cut the wait short: no peer failed, no zmq error is counted
	// (before: a replay-capacity error for the slot the replay gave up on).
	require.Zero(t, seriesSum(f.p.metrics().ZMQErrors, seqID))
	requireHeld(t, f.ix, seqID, 2, 10)
	require.Equal(t, 0.0, testutil.ToFloat64(f.p.sm.ReplayInProgress.WithLabelValues(seqID)))
	require.Positive(t, lim.WaitTotal())
	f.publish(11, 11)
	f.wait(11)
}

// SGLang's replay socket is off unless configured: an SGLang endpoint gets
// no default replay address even with PoolConfig.Replay, but one it names
// is its replay socket; a "noreplay" endpoint naming one is an error.
func TestEngineKindDecidesReplay(t *testing.T) {
	cfg := PoolConfig{Replay: true}.withDefaults()
	ep, err := Endpoint{ID: "10.0.0.1:8000", Engine: EngineSGLang}.resolve(&cfg)
	require.NoError(t, err)
	require.Empty(t, ep.ReplayAddress)
	ep, err = Endpoint{ID: "10.0.0.1:8000"}.resolve(&cfg)
	require.NoError(t, err)
	require.Equal(t, "tcp://10.0.0.1:5559", ep.ReplayAddress)
	require.Equal(t, EngineVLLM, ep.Engine)
	ep, err = Endpoint{ID: "10.0.0.1:8000", Engine: EngineNoReplay}.resolve(&cfg)
	require.NoError(t, err)
	require.Empty(t, ep.ReplayAddress)
	ep, err = Endpoint{ID: "10.0.0.1:8000", Engine: EngineSGLang, ReplayAddress: "tcp://10.0.0.1:1"}.resolve(&cfg)
	require.NoError(t, err)
	require.Equal(t, "tcp://10.0.0.1:1", ep.ReplayAddress)
	_, err = Endpoint{ID: "10.0.0.1:8000", Engine: EngineNoReplay, ReplayAddress: "tcp://10.0.0.1:1"}.resolve(&cfg)
	require.Error(t, err)
	_, err = Endpoint{ID: "10.0.0.1:8000", Engine: EngineSGLang, SnapshotAddress: "tcp://10.0.0.1:2"}.resolve(&cfg)
	require.Error(t, err, "SGLang's snapshot protocol is not vLLM's")
	_, err = Endpoint{ID: "10.0.0.1:8000", Engine: "tgi"}.resolve(&cfg)
	require.Error(t, err)
	sg := PoolConfig{Replay: true, Engine: EngineSGLang}.withDefaults()
	ep, err = Endpoint{ID: "10.0.0.1:8000"}.resolve(&sg)
	require.NoError(t, err)
	require.Empty(t, ep.ReplayAddress, "the pool's default engine applies")
	require.Error(t, PoolConfig{Engine: "x"}.Validate())
}

// A fleet of SGLang engines with replay enabled pool-wide: messages flow and
// no replay error is counted (before: a replay-connect error and a failed
// replay per endpoint).
func TestPoolSGLangEndpointNoReplayNoise(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel})
	defer pub.Close()
	p, _ := newTestPool(t, PoolConfig{Replay: true, Engine: EngineSGLang, TailProbeDelay: -1}, ix)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint()}))
	publishUntilReceived(t, p, pub, id)
	last := publishN(t, pub, 3)
	waitApplied(t, p, id, last)
	m := p.metrics()
	for _, op := range []string{replay.OpConnect, replay.OpNoProgress, replay.OpIncomplete} {
		require.Zero(t, counter(m.ZMQErrors, id, op))
	}
	require.Zero(t, counter(m.Replays, id, replayFailed))
	st, _ := p.Status(id)
	require.Empty(t, st.Replay)
}

// With heartbeats disabled the idle deadline recycles a quiet engine's
// socket: that is routine, so it counts no error and no reconnection, and
// the check after it replays nothing that was not missing. Before, every
// recycle counted zmq_errors{operation="recv"} and a reconnection.
func TestPoolQuietRecycleCountsNothing(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel, ReplayAddr: "127.0.0.1:0"})
	defer pub.Close()
	logs := &logBuffer{}
	p, err := NewPool(PoolConfig{HeartbeatInterval: -1, IdleTimeout: 150 * time.Millisecond, TailProbeDelay: -1},
		ix, Options{Set: telemetry.Set{Logger: debugLogger(logs)}})
	require.NoError(t, err)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}))
	last := publishUntilReceived(t, p, pub, id)
	waitApplied(t, p, id, last)
	require.Eventually(t, func() bool { return logs.count("No KV events within the idle deadline") >= 3 },
		poolWait, poolTick)
	m := p.metrics()
	require.Zero(t, counter(m.ZMQErrors, id, "recv"))
	require.Zero(t, counter(m.Reconnections, id))
	require.Zero(t, counter(m.Replays, id, replayPartial))
	require.Zero(t, counter(m.PublisherRestarts, id))
	require.Eventually(t, func() bool { return counter(p.sm.Probes, id, probeEmpty) >= 2 }, poolWait, poolTick)
	require.NoError(t, p.Close())
}

// A peer that completes the handshake and then drops the connection at
// once: the backoff keeps doubling (it is reset only by a session that
// delivered messages), and the failure is logged once, not per cycle.
func TestSupervisorBackoffNotResetByEmptySessions(t *testing.T) {
	defer leakcheck.Check(t)()
	l, err := zmqx.Listen(context.Background(), "127.0.0.1:0", zmq4.Pub, zmqx.Options{}, nil)
	require.NoError(t, err)
	accepted := make(chan struct{}, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
			accepted <- struct{}{}
		}
	}()
	defer func() { _ = l.Close(); <-done }()
	ix := newPoolIndex(t)
	logs := &logBuffer{}
	p, err := NewPool(PoolConfig{MinBackoff: 5 * time.Millisecond, MaxBackoff: 40 * time.Millisecond}, ix, Options{Set: telemetry.Set{Logger: debugLogger(logs)}})
	require.NoError(t, err)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: l.Endpoint()}))
	for range 8 {
		select {
		case <-accepted:
		case <-time.After(poolWait):
			t.Fatal("no reconnect")
		}
	}
	require.NoError(t, p.Close())
	out := logs.String()
	require.Equal(t, 1, logs.count("KV-event subscription failed"), out)
	require.Equal(t, 1, logs.count("Subscribed to KV events"), out)
	require.Contains(t, out, "backoff=40ms", "the backoff grew to its cap: %s", out)
}

// EnsureFrom resumes an endpoint from a saved Position: the first
// connection checks the batch at the position and continues after it,
// without replaying from 0.
func TestPoolEnsureFromPositionResumes(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel, ReplayAddr: "127.0.0.1:0"})
	defer pub.Close()
	const id = "127.0.0.1:8000"
	ep := Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}
	p1, _ := newTestPool(t, PoolConfig{TailProbeDelay: -1}, ix)
	require.NoError(t, p1.Ensure(ep))
	last := publishUntilReceived(t, p1, pub, id)
	waitApplied(t, p1, id, last)
	pos, ok := p1.Position(id)
	require.True(t, ok)
	require.Equal(t, last, pos.Seq)
	require.Equal(t, PayloadDigest(poolPayload(last)), pos.Digest)
	require.NoError(t, p1.Close()) // the index keeps its entries, as a restored checkpoint would

	more := publishN(t, pub, 3) // published while no router ran
	p2, logs := newTestPool(t, PoolConfig{TailProbeDelay: -1}, ix)
	defer p2.Close()
	require.NoError(t, p2.EnsureFrom(ep, pos))
	waitAppliedLogs(t, p2, id, more, logs)
	st, _ := p2.Status(id)
	require.Equal(t, uint64(3), st.Messages, "only the batches after the position were applied")
	require.Zero(t, counter(p2.metrics().PublisherRestarts, id))
	require.NotContains(t, logs.String(), "Requesting proactive replay on connect")
	requireHeld(t, ix, id, 0, more)
	require.NoError(t, p2.Close())
}

// The model known only from the topic: with no model configured and an
// idle engine, the connect replay still runs and takes the model from the
// replies' topic frame. Before, the replay was skipped and the index stayed
// empty until the engine's next batch.
func TestPoolModelFromReplayTopic(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel, ReplayAddr: "127.0.0.1:0"})
	defer pub.Close()
	last := publishN(t, pub, 4) // then idle
	p, logs := newTestPool(t, PoolConfig{TailProbeDelay: -1}, ix)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}))
	waitAppliedLogs(t, p, id, last, logs)
	requireHeldLogs(t, ix, id, 0, last, logs)
	require.NoError(t, p.Close())
}

// Legacy replies carry no topic: with no model configured and no live
// message seen, replayed batches are applied under the pool's default model
// at once (an idle engine is indexed by the connect replay alone). The first
// live message names another model: the endpoint is cleared, the batches
// counted (model_mismatch) and replayed again under the named model.
func TestStreamLegacyReplayGuessedModelCheckedByLiveMessage(t *testing.T) {
	defer leakcheck.Check(t)()
	buf := replay.NewBuffer(100)
	srv, err := replay.NewServer(replay.ServerConfig{Addr: "127.0.0.1:0", Layout: replay.LayoutLegacy}, buf, replay.Options{})
	require.NoError(t, err)
	defer srv.Close()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1}, 0, srv.Endpoint())
	defer f.close()
	f.st.mu.Lock()
	f.st.s.model, f.st.cfgModel = "", ""
	f.st.mu.Unlock()
	for s := range uint64(3) {
		buf.Add(s, nil, poolPayload(s))
	}
	f.st.onConnect(false)
	f.wait(2)
	require.False(t, f.held(0), "keyed under the pool's default (none), not the topic's model")
	buf.Add(3, nil, poolPayload(3))
	f.st.receive(3, poolPayload(3), poolModel)
	f.wait(3)
	requireHeld(t, f.ix, seqID, 0, 3)
	require.Equal(t, 3.0, f.count("dropped", string(dropModelMismatch)), f.logs.String())
}

// replayErrorsAtReport gives a replay client config whose OnAttemptError
// sends, for every failed attempt, the endpoint's zmq_errors_total (all
// operations) as it stands when the attempt is reported: after the pool
// counted it, before a Remove deletes the endpoint's series.
func replayErrorsAtReport(p **Pool, id string) (replay.ClientConfig, <-chan float64) {
	reports := make(chan float64, 64)
	return replay.ClientConfig{
		IdleTimeout: time.Hour, // the silent peer fails no attempt by itself
		OnAttemptError: func(*replay.Error) {
			reports <- seriesSum((*p).metrics().ZMQErrors, id)
		},
	}, reports
}

// A replay kvroute supersedes (a Resync while the connect replay waits on
// its peer) is not the peer's failure: its interrupted attempt is counted
// in no zmq_errors_total operation. Before, it was counted as a
// replay-incomplete (or replay-send, replay-connect) error of a peer that
// had done nothing wrong.
func TestStreamSupersededReplayCountsNoPeerError(t *testing.T) {
	defer leakcheck.Check(t)()
	addr, accepted, stop := startSilentPeer(t)
	defer stop()
	var p *Pool
	rc, reports := replayErrorsAtReport(&p, seqID)
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1, ReplayClient: rc}, 0, addr)
	p = f.p
	defer f.close()
	f.st.onConnect(false) // the connect replay from 0
	await(t, accepted, "the connect replay's connection")
	require.NoError(t, f.p.Resync(seqID))
	require.Zero(t, await(t, reports, "the superseded attempt's report"), f.logs.String())
	await(t, accepted, "the resync replay's connection")
	require.Zero(t, f.count("replays", replayFailed))
}

// Closing the pool while a replay waits on its peer counts no peer error.
func TestStreamReplayCancelledOnCloseCountsNoPeerError(t *testing.T) {
	defer leakcheck.Check(t)()
	addr, accepted, stop := startSilentPeer(t)
	defer stop()
	var p *Pool
	rc, reports := replayErrorsAtReport(&p, seqID)
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1, ReplayClient: rc}, 0, addr)
	p = f.p
	f.st.onConnect(false)
	await(t, accepted, "the connect replay's connection")
	f.close() // waits for the replay, which reported its attempt
	require.Zero(t, await(t, reports, "the cancelled attempt's report"), f.logs.String())
	require.Zero(t, seriesSum(f.p.metrics().ZMQErrors, seqID))
}

// Removing an endpoint whose connect replay waits on its peer counts no
// peer error, not even in the moment before its series are deleted.
func TestPoolRemovedEndpointsReplayCountsNoPeerError(t *testing.T) {
	defer leakcheck.Check(t)()
	addr, accepted, stop := startSilentPeer(t)
	defer stop()
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel})
	defer pub.Close()
	const id = "127.0.0.1:8000"
	var p *Pool
	rc, reports := replayErrorsAtReport(&p, id)
	p, logs := newTestPool(t, PoolConfig{TailProbeDelay: -1, ReplayClient: rc}, newPoolIndex(t))
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint(), ReplayAddress: addr}))
	await(t, accepted, "the connect replay's connection")
	p.Remove(id)
	require.Zero(t, await(t, reports, "the cancelled attempt's report"), logs.String())
}
