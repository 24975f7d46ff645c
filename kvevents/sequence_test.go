package kvevents

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/replay"
)

// seqFixture drives one stream directly: the test goroutine plays the
// receiver, and a real replay server on loopback plays the publisher's
// replay socket. publish buffers a batch and delivers it live; hide only
// buffers it (lost on the wire, recoverable by replay).
type seqFixture struct {
	t    *testing.T
	ix   *kvindex.Index
	p    *Pool
	logs *logBuffer
	st   *stream
	buf  *replay.Buffer
	srv  *replay.Server
	// closers run after the pool closed (a snapshot server, say).
	closers []func() error
}

const seqID = "10.0.0.1:8000"

func newSeqFixture(t *testing.T, cfg PoolConfig, bufSize int, replayAddr string) *seqFixture {
	return newSeqFixtureOn(t, cfg, bufSize, replayAddr, newPoolIndex(t))
}

// newSeqFixtureOn is newSeqFixture on the index ix (one loaded from a
// checkpoint, say).
func newSeqFixtureOn(t *testing.T, cfg PoolConfig, bufSize int, replayAddr string, ix *kvindex.Index) *seqFixture {
	f := &seqFixture{t: t, ix: ix}
	if bufSize > 0 {
		f.buf = replay.NewBuffer(bufSize)
		srv, err := replay.NewServer(replay.ServerConfig{Addr: "127.0.0.1:0"}, f.buf, replay.Options{})
		require.NoError(t, err)
		f.srv = srv
		replayAddr = srv.Endpoint()
	}
	if cfg.ReplayClient.Limiter == nil {
		cfg.ReplayClient.Limiter = replay.NewLimiter(8)
	}
	f.p, f.logs = newTestPool(t, cfg, f.ix)
	f.p.mu.Lock()
	f.st = f.p.newStreamLocked(seqID, poolModel, replayAddr)
	f.p.streams[seqID] = f.st // reachable by Status; closed by Pool.Close
	f.p.mu.Unlock()
	return f
}

func (f *seqFixture) close() {
	require.NoError(f.t, f.p.Close())
	if f.srv != nil {
		require.NoError(f.t, f.srv.Close())
	}
	for _, c := range f.closers {
		require.NoError(f.t, c())
	}
}

func (f *seqFixture) hide(seq, batch uint64) {
	f.buf.Add(seq, nil, poolPayload(batch))
}

func (f *seqFixture) publish(seq, batch uint64) {
	if f.buf != nil {
		f.hide(seq, batch)
	}
	f.st.receive(seq, poolPayload(batch), poolModel)
}

func (f *seqFixture) wait(seq uint64) { waitApplied(f.t, f.p, seqID, seq) }

func (f *seqFixture) status() EndpointStatus {
	s, ok := f.p.Status(seqID)
	require.True(f.t, ok)
	return s
}

func (f *seqFixture) held(batch uint64) bool { return heldBlocks(f.ix, seqID, batch) == poolBlocks }

func (f *seqFixture) count(c string, labels ...string) float64 {
	m := f.p.metrics()
	switch c {
	case "gaps":
		return counter(m.SequenceGaps, seqID)
	case "restarts":
		return counter(m.PublisherRestarts, seqID)
	case "replays":
		return counter(m.Replays, append([]string{seqID}, labels...)...)
	case "dropped":
		return counter(m.Dropped, append([]string{seqID}, labels...)...)
	case "errors":
		return counter(m.ZMQErrors, append([]string{seqID}, labels...)...)
	}
	f.t.Fatalf("unknown counter %s", c)
	return 0
}

func TestStreamDuplicatesAndGapWithoutReplay(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 0, "")
	defer f.close()
	f.publish(0, 0)
	f.publish(0, 0) // duplicate on the wire
	f.publish(1, 1)
	f.wait(1)
	require.Equal(t, 1.0, f.count("dropped", string(dropStaleSeq)))
	require.False(t, f.status().Degraded)

	f.publish(3, 3) // 2 is lost and there is no replay address
	f.wait(3)
	require.Equal(t, 1.0, f.count("gaps"))
	st := f.status()
	require.True(t, st.Degraded, "a gap without replay leaves the index possibly stale")
	require.Equal(t, uint64(3), st.Messages)
	require.True(t, f.held(0) && f.held(1) && f.held(3))
	require.False(t, f.held(2))
	require.Equal(t, 1, f.logs.count("Sequence gap without replay address"), f.logs.String())
}

func TestStreamGapRepairedByReplay(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 100, "")
	defer f.close()
	f.publish(0, 0) // no watermark: proactive replay from 0
	f.wait(0)
	f.publish(1, 1)
	f.hide(2, 2)
	f.hide(3, 3)
	f.publish(4, 4) // gap: replay from 2
	f.publish(5, 5) // held while the replay runs, or applied after it
	f.wait(5)
	for b := uint64(0); b <= 5; b++ {
		require.True(t, f.held(b), "batch %d", b)
	}
	require.Equal(t, 1.0, f.count("gaps"))
	require.Equal(t, 2.0, f.count("replays", replayComplete))
	require.Equal(t, uint64(6), f.status().Messages, "no batch applied twice")
	require.False(t, f.status().Degraded)
	logs := f.logs.String()
	require.Contains(t, logs, "Requesting proactive replay on connect")
	require.Contains(t, logs, "Sequence gap: requesting replay")
	require.Equal(t, 2, f.logs.count("Replay complete"), logs)
}

func TestStreamPublisherRestartClearsAndReplaysFromZero(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 100, "")
	defer f.close()
	for s := range uint64(5) {
		f.publish(s, s)
	}
	f.wait(4)
	// The engine restarts: sequences from 0 again, with a fresh cache.
	f.hide(0, 100) // the buffer restarts with the new stream
	f.publish(1, 101)
	waitAppliedLogs(t, f.p, seqID, 1, f.logs)
	require.Equal(t, 1.0, f.count("restarts"))
	for b := uint64(0); b < 5; b++ {
		require.False(t, f.held(b), "batch %d of the old lifetime survived the restart", b)
	}
	require.True(t, f.held(100), "seq 0 of the new lifetime comes from the replay from 0")
	require.True(t, f.held(101))
	require.Contains(t, f.logs.String(), "Requesting replay from 0 after publisher restart")
}

func TestStreamUncoveredGapRebuildsFromReplayWindow(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 4, "")
	defer f.close()
	f.publish(0, 0)
	f.wait(0)
	for s := uint64(1); s < 10; s++ {
		f.hide(s, s) // the ring keeps only the last 4
	}
	f.publish(10, 10) // gap from 1: the buffer starts at 7
	f.wait(10)
	require.Equal(t, 1.0, f.count("replays", replayPartial))
	require.False(t, f.held(0), "entries from before an unrepairable gap are dropped")
	for b := uint64(7); b <= 10; b++ {
		require.True(t, f.held(b), "batch %d of the replay window", b)
	}
	require.Contains(t, f.logs.String(), "Replay cannot fill the gap: endpoint cleared")
}

func TestStreamFailedReplayCoolsDownAndClearsOnGaps(t *testing.T) {
	defer leakcheck.Check(t)()
	// The replay address refuses connections.
	f := newSeqFixture(t, PoolConfig{ReplayCooldown: time.Hour, ReplayClient: replay.ClientConfig{
		MaxAttemptsWithoutProgress: 1, Backoff: time.Millisecond}}, 0, refusingAddr(t))
	defer f.close()

	f.publish(0, 0) // proactive replay fails: cooldown, then 0 is the base
	f.wait(0)
	require.Equal(t, 1.0, f.count("replays", replayFailed))
	require.GreaterOrEqual(t, f.count("errors", replay.OpConnect), 1.0)
	require.True(t, f.held(0))
	f.publish(1, 1)
	f.publish(3, 3) // gap while cooling down: no replay, the endpoint is rebuilt from 3
	f.wait(3)
	require.Equal(t, 1.0, f.count("gaps"))
	require.Equal(t, 1.0, f.count("replays", replayFailed), "no replay during the cooldown")
	require.False(t, f.held(0) || f.held(1), "stale entries dropped")
	require.True(t, f.held(3))
	require.Contains(t, f.logs.String(), "Replay failed")
}

func TestStreamHoldIsBoundedDuringReplay(t *testing.T) {
	defer leakcheck.Check(t)()
	// A replay socket that accepts TCP and never speaks keeps the replay
	// running for its handshake deadline, long enough (2 s) for the four
	// batches below to arrive while it runs, however the test is paused;
	// the grace keeps the replay from being cut short as too slow first.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	f := newSeqFixture(t, PoolConfig{HoldSize: 2, ReplayCooldown: time.Hour, ReplayGrace: time.Hour, ReplayClient: replay.ClientConfig{
		MaxAttemptsWithoutProgress: 1, HandshakeTimeout: 2 * time.Second}}, 0, "tcp://"+l.Addr().String())
	defer f.close()
	f.publish(0, 0) // starts the replay; held
	require.Eventually(t, func() bool { return f.status().Replaying }, poolWait, poolTick)
	for s := uint64(1); s <= 4; s++ {
		f.publish(s, s)
	}
	f.wait(1)
	require.Equal(t, 3.0, f.count("dropped", string(dropHoldFull)), "0 and 1 held, 2..4 dropped")
	require.Equal(t, 1.0, f.count("replays", replayFailed))
	require.True(t, f.held(0) && f.held(1))
	require.False(t, f.held(2))
}

func TestStreamDecodeErrorAdvancesWatermark(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 0, "")
	defer f.close()
	f.publish(0, 0)
	f.st.receive(1, []byte{0xc1}, poolModel) // 0xc1 is never valid msgpack
	f.publish(2, 2)
	f.wait(2)
	require.Equal(t, 1.0, f.count("dropped", string(dropDecodeError)))
	require.Equal(t, 1.0, f.count("errors", "decode"))
	require.Zero(t, f.count("gaps"))
	require.True(t, f.held(0) && f.held(2))
}

// A batch that does not decode changed nothing in the index, so the
// position the index records (what a checkpoint persists and a resumed
// stream starts from) stays the last applied batch's, with the endpoint's
// cache-group kinds: a resumed stream needs them to classify removals.
func TestStreamDecodeErrorKeepsRecordedPosition(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{}, 0, "")
	defer f.close()
	f.publish(0, 0)
	f.wait(0)
	raw, ok := f.ix.Position(seqID)
	require.True(t, ok)
	before, groups, err := parsePosition(raw)
	require.NoError(t, err)
	require.Equal(t, positionOf(0, poolPayload(0)), before)
	require.Equal(t, map[int]string{0: "full_attention"}, groups)

	f.st.receive(1, []byte{0xc1}, poolModel) // 0xc1 is never valid msgpack
	f.wait(1)
	require.Equal(t, 1.0, f.count("dropped", string(dropDecodeError)))
	raw, ok = f.ix.Position(seqID)
	require.True(t, ok)
	after, groups, err := parsePosition(raw)
	require.NoError(t, err)
	require.Equal(t, before, after, "an undecodable batch moved the recorded position")
	require.Equal(t, map[int]string{0: "full_attention"}, groups, "the group kinds were lost")

	f.publish(2, 2) // the stream goes on: no gap
	f.wait(2)
	require.Zero(t, f.count("gaps"))
	raw, _ = f.ix.Position(seqID)
	after, groups, err = parsePosition(raw)
	require.NoError(t, err)
	require.Equal(t, positionOf(2, poolPayload(2)), after)
	require.Equal(t, map[int]string{0: "full_attention"}, groups)
}

// Queue overflow: a message that finds its worker queue full is dropped,
// counted, and the endpoint is resynchronised from its last applied
// sequence by replay.
func TestStreamQueueOverflowDropsAndResyncs(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newSeqFixture(t, PoolConfig{Concurrency: 1, QueueSize: 1}, 100, "")
	defer f.close()
	f.publish(0, 0)
	f.wait(0)
	// Stall the worker: it blocks on the stream's lock with one message while
	// the queue (1 slot) fills; the next message overflows.
	released := make(chan struct{})
	f.st.mu.Lock()
	go func() {
		defer close(released)
		defer f.st.mu.Unlock()
		for deadline := time.Now().Add(poolWait); time.Now().Before(deadline); {
			if f.count("dropped", string(dropQueueFull)) >= 1 {
				return
			}
			time.Sleep(poolTick) // polling a counter, bounded by the deadline
		}
	}()
	for s := uint64(1); s <= 4; s++ {
		f.publish(s, s) // the overflowing receive blocks until the worker is released
	}
	<-released
	f.wait(4)
	require.GreaterOrEqual(t, f.count("dropped", string(dropQueueFull)), 1.0)
	require.GreaterOrEqual(t, f.count("replays", replayComplete), 2.0, "proactive + resync")
	require.Contains(t, f.logs.String(), "Resynchronising after dropped messages")
	for b := uint64(0); b <= 4; b++ {
		require.True(t, f.held(b), "batch %d", b)
	}
	require.Equal(t, uint64(5), f.status().Messages)
}
