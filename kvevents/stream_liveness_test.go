package kvevents

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/replay"
	"github.com/kvroute/kvroute/telemetry"
)

var (
	pidA = [16]byte{0xa0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	pidB = [16]byte{0xb0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
)

// idPayload is poolPayload(batch) in vLLM's snapshot revision, published
// by the publisher with identity id.
func idPayload(batch uint64, id [16]byte) []byte {
	b := poolBatch(batch, poolBlocks)
	b.PublisherID, b.HasPublisherID = id, true
	return wire.AppendBatch(nil, b, wire.FormatVLLM)
}

// heartbeatPayload is the empty batch an idle publisher with identity id
// sends every second.
func heartbeatPayload(id [16]byte) []byte {
	return wire.AppendBatch(nil, &wire.Batch{TS: 1, HasDPRank: true, PublisherID: id, HasPublisherID: true}, wire.FormatVLLM)
}

// newClockFixture is a seqFixture (no replay address) on a Manual clock.
func newClockFixture(t *testing.T, cfg PoolConfig, clock *telemetry.Manual) *seqFixture {
	t.Helper()
	logs := &logBuffer{}
	f := &seqFixture{t: t, ix: newPoolIndex(t), logs: logs}
	cfg.TailProbeDelay = -1
	cfg.ReplayClient.Limiter = replay.NewLimiter(8)
	var err error
	f.p, err = NewPool(cfg, f.ix, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Logger: logs.logger(), Clock: clock}})
	require.NoError(t, err)
	f.p.mu.Lock()
	f.st = f.p.newStreamLocked(seqID, poolModel, "")
	f.p.streams[seqID] = f.st
	f.p.mu.Unlock()
	f.st.setConnected(true)
	return f
}

// A publisher identity that changes is an engine restart even when the
// sequence goes on (the engine restarted while no message was seen, and its
// new lifetime is already past the old watermark): the endpoint is cleared,
// counted once, and the new lifetime's batches are its entries. Without
// identities this was a sequence gap that kept the old lifetime's blocks.
func TestStreamNewPublisherIdentityIsARestart(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newClockFixture(t, PoolConfig{}, telemetry.NewManual(time.Unix(1_700_000_000, 0)))
	defer f.close()

	for s := uint64(0); s <= 3; s++ {
		f.st.receive(s, idPayload(s, pidA), poolModel)
	}
	f.wait(3)
	require.True(t, f.held(0))
	require.Equal(t, pidA, f.status().PublisherID)

	f.st.receive(10, idPayload(10, pidB), poolModel) // a new lifetime, sequence ahead
	f.wait(10)
	require.False(t, f.held(0), "the old lifetime's blocks are gone")
	require.True(t, f.held(10))
	require.Equal(t, 1.0, f.count("restarts"))
	require.Equal(t, 1.0, counter(f.p.sm.lv.IdentityChanges, seqID))
	require.Equal(t, 0.0, f.count("gaps"), "a restart, not a gap")
	require.Equal(t, pidB, f.status().PublisherID)
	require.False(t, f.status().Degraded)

	// A restart whose sequence also went backwards counts once.
	f.st.receive(0, idPayload(20, pidA), poolModel)
	f.wait(0)
	require.Equal(t, 2.0, f.count("restarts"))
	require.Equal(t, 2.0, counter(f.p.sm.lv.IdentityChanges, seqID))
	require.False(t, f.held(10))
	require.True(t, f.held(20))
	require.Equal(t, 2, f.logs.count("new publisher identity"), f.logs.String())
	require.Equal(t, 0, f.logs.count("sequence went backwards"), f.logs.String())
}

// The identity an earlier draft of vLLM's snapshot work appended to the
// sequence frame (8 + 16 bytes) restarts the endpoint the same way.
func TestStreamFrameIdentityIsARestart(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newClockFixture(t, PoolConfig{}, telemetry.NewManual(time.Unix(1_700_000_000, 0)))
	defer f.close()
	frame := func(seq uint64, id [16]byte) [][]byte {
		seqFrame := append(make([]byte, 8, 24), id[:]...)
		seqFrame[7] = byte(seq)
		return [][]byte{[]byte("kv@" + seqID + "@" + poolModel), seqFrame, poolPayload(seq)}
	}
	for _, fr := range [][][]byte{frame(0, pidA), frame(1, pidA), frame(5, pidB)} {
		seq, ok := parseLive(fr)
		require.True(t, ok, "a 24-byte sequence frame is well-formed")
		f.st.receiveFrame(seq, fr[1][8:], topicMetaOf(fr[0]), fr[2], poolModel)
	}
	f.wait(5)
	require.False(t, f.held(0))
	require.True(t, f.held(5))
	require.Equal(t, 1.0, f.count("restarts"))
	require.Equal(t, pidB, f.status().PublisherID)
	_, ok := parseLive([][]byte{nil, make([]byte, 16), nil})
	require.False(t, ok, "other sequence frame sizes stay malformed")
}

// A publisher that sends heartbeats and then falls silent, its socket
// still open, is degraded once PublisherSilence passes on the pool's clock,
// counted once, and live again at its next message.
func TestStreamSilentPublisherIsDegraded(t *testing.T) {
	defer leakcheck.Check(t)()
	start := time.Unix(1_700_000_000, 0)
	clock := telemetry.NewManual(start)
	f := newClockFixture(t, PoolConfig{PublisherSilence: 3 * time.Second}, clock)
	defer f.close()

	f.st.receive(0, idPayload(0, pidA), poolModel)
	f.wait(0)
	require.Eventually(t, func() bool { return clock.Waiters() >= 1 }, poolWait, poolTick, "the silence timer is armed")
	st := f.status()
	require.True(t, st.Heartbeats)
	require.Equal(t, StateLive, st.State)

	// Heartbeats every second keep it live well past the limit.
	for s := uint64(1); s <= 5; s++ {
		clock.Advance(time.Second)
		f.st.receive(s, heartbeatPayload(pidA), poolModel)
		f.wait(s) // heard before the clock moves on: the silence timer never sees a stale heartbeat
	}
	require.Equal(t, 5.0, counter(f.p.sm.lv.Heartbeats, seqID))
	require.Equal(t, StateLive, f.status().State)
	require.Equal(t, 0.0, counter(f.p.sm.lv.HeartbeatTimeouts, seqID))
	require.True(t, f.held(0), "heartbeats change nothing in the index")

	// Silence: degraded at the limit, not before.
	// The timer was armed at the first message and re-arms itself, when it
	// fires, for the rest of the limit after the last heartbeat it has
	// seen when it runs (its own goroutine, which may run after a later
	// heartbeat): the check is due 1 to 3 s after the clock's +5 s, never
	// later than 3 s after the last heartbeat.
	require.Eventually(t, func() bool {
		return clock.Armed(start.Add(6*time.Second)) || clock.Armed(start.Add(7*time.Second)) || clock.Armed(start.Add(8*time.Second))
	}, poolWait, poolTick, "the silence check is armed for at most 3 s after the last heartbeat")
	// A second at a time, each advance ending on the time a check is due:
	// a check re-arms from the time it read (1 or 2 s quiet) for +8 s. One
	// advance of 2 s could move the clock on from +6 s while the check due
	// then, having read +6 s, re-armed from +7 s: for +9 s.
	clock.Advance(time.Second)
	require.Eventually(t, func() bool { return clock.Armed(start.Add(7*time.Second)) || clock.Armed(start.Add(8*time.Second)) },
		poolWait, poolTick, "a check due at +6 s re-arms for the rest of the limit")
	clock.Advance(time.Second)
	require.Eventually(t, func() bool { return clock.Armed(start.Add(8 * time.Second)) }, poolWait, poolTick,
		"the silence check is armed for 3 s after the last heartbeat")
	require.Equal(t, StateLive, f.status().State)
	clock.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return f.status().State == StateDegraded }, poolWait, poolTick, f.logs.String())
	st = f.status()
	require.True(t, st.Silent)
	require.True(t, st.Degraded)
	require.True(t, st.Connected, "the socket is still open")
	require.Equal(t, 1.0, counter(f.p.sm.lv.HeartbeatTimeouts, seqID))

	clock.Advance(10 * time.Second) // still silent: counted once
	require.Equal(t, 1.0, counter(f.p.sm.lv.HeartbeatTimeouts, seqID))

	f.st.receive(6, heartbeatPayload(pidA), poolModel)
	require.Eventually(t, func() bool { return f.status().State == StateLive }, poolWait, poolTick)
	require.False(t, f.status().Silent)
	require.Equal(t, 1, f.logs.count("Publisher heard again"), f.logs.String())
}

// A publisher without identity or heartbeats (every engine before vLLM's
// snapshot revision) is never judged by its silence: vLLM publishes
// nothing while idle.
func TestStreamSilenceOfOlderPublishersIsNormal(t *testing.T) {
	defer leakcheck.Check(t)()
	clock := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	f := newClockFixture(t, PoolConfig{PublisherSilence: time.Second}, clock)
	defer f.close()
	before := clock.Waiters()
	f.st.receive(0, poolPayload(0), poolModel)
	f.wait(0)
	require.Equal(t, before, clock.Waiters(), "no silence timer")
	clock.Advance(time.Hour)
	st := f.status()
	require.False(t, st.Heartbeats)
	require.False(t, st.HasPublisherID)
	require.Equal(t, StateLive, st.State)
}

// locality, ownership and session_id are counted per field: the index keys
// blocks by tier (STORAGE included), group and key only.
func TestStreamCountsUnindexedFields(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newClockFixture(t, PoolConfig{}, telemetry.NewManual(time.Unix(1_700_000_000, 0)))
	defer f.close()
	b := poolBatch(0, poolBlocks)
	b.Events[0].Locality, b.Events[0].SessionID, b.Events[0].Medium = "REMOTE", "s-1", "STORAGE"
	f.st.receive(0, wire.AppendBatch(nil, b, wire.FormatVLLM), poolModel)
	f.wait(0)
	require.Equal(t, 1.0, counter(f.p.sm.lv.UnindexedFields, seqID, fieldLocality))
	require.Equal(t, 1.0, counter(f.p.sm.lv.UnindexedFields, seqID, fieldSessionID))
	require.Equal(t, 0.0, counter(f.p.sm.lv.UnindexedFields, seqID, fieldOwnership))
}

// A publisher that sends heartbeats is not tail-probed: a heartbeat every
// second would re-arm the probe and, a second later, fire it, asking the
// replay socket every second for nothing; its next heartbeat shows a lost
// tail as a gap instead.
func TestStreamHeartbeatingPublisherIsNotTailProbed(t *testing.T) {
	defer leakcheck.Check(t)()
	clock := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	buf := replay.NewBuffer(16)
	srv, err := replay.NewServer(replay.ServerConfig{Addr: "127.0.0.1:0"}, buf, replay.Options{})
	require.NoError(t, err)
	logs := &logBuffer{}
	f := &seqFixture{t: t, ix: newPoolIndex(t), logs: logs, buf: buf, srv: srv}
	f.p, err = NewPool(PoolConfig{TailProbeDelay: time.Second, PublisherSilence: -1,
		ReplayClient: replay.ClientConfig{Limiter: replay.NewLimiter(8)}},
		f.ix, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Logger: logs.logger(), Clock: clock}})
	require.NoError(t, err)
	f.p.mu.Lock()
	f.st = f.p.newStreamLocked(seqID, poolModel, srv.Endpoint())
	f.p.streams[seqID] = f.st
	f.p.mu.Unlock()
	defer f.close()

	for s := uint64(0); s <= 2; s++ {
		buf.Add(s, nil, idPayload(s, pidA))
	}
	f.st.receive(2, idPayload(2, pidA), poolModel) // the connect replay applies 0..2
	f.wait(2)
	// The connect replay's request holds a clock timer until its goroutine
	// has released it, which may come after its batches were applied; a
	// heartbeating publisher's stream arms none of its own (liveness is
	// off here), so the clock settles at no timer.
	require.Eventually(t, func() bool { return clock.Waiters() == 0 }, time.Minute, time.Millisecond,
		"a timer stays armed (a tail probe?)\n%s", logs)
	clock.Advance(5 * time.Second)
	require.Zero(t, clock.Waiters(), "no timer armed by the time passing")
	require.Zero(t, counter(f.p.sm.Probes, seqID, probeEmpty)+counter(f.p.sm.Probes, seqID, probeRepaired),
		"no tail probe for a heartbeating publisher\n%s", logs)
}

// A publisher that stops sending identities (rolled back to a release
// without snapshots) is no longer judged by its silence, and a silence it
// was degraded for ends.
func TestStreamPublisherWithoutIdentityIsUnwatched(t *testing.T) {
	defer leakcheck.Check(t)()
	clock := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	f := newClockFixture(t, PoolConfig{PublisherSilence: time.Second}, clock)
	defer f.close()
	f.st.receive(0, idPayload(0, pidA), poolModel)
	f.wait(0)
	require.Eventually(t, func() bool { return clock.Waiters() >= 1 }, poolWait, poolTick)
	clock.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return f.status().Silent }, poolWait, poolTick)

	f.st.receive(1, poolPayload(1), poolModel) // no identity
	f.wait(1)
	st := f.status()
	require.False(t, st.Heartbeats)
	require.False(t, st.Silent)
	require.Equal(t, StateLive, st.State)
	clock.Advance(time.Hour)
	require.Equal(t, StateLive, f.status().State)
	require.Equal(t, 1.0, counter(f.p.sm.lv.HeartbeatTimeouts, seqID))
}

// A payload that does not decode tells nothing of the publisher's
// identity: it is heard (a message arrived) but does not unwatch a
// publisher that sends identities, so a silence that follows it still
// degrades the endpoint. Before, one bad payload was taken for a batch
// without identity (a release without snapshots) and the publisher's
// silence was never checked again.
func TestStreamUndecodablePayloadKeepsPublisherWatched(t *testing.T) {
	defer leakcheck.Check(t)()
	clock := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	f := newClockFixture(t, PoolConfig{PublisherSilence: time.Second}, clock)
	defer f.close()
	f.st.receive(0, idPayload(0, pidA), poolModel)
	f.wait(0)
	require.Eventually(t, func() bool { return clock.Waiters() >= 1 }, poolWait, poolTick)
	clock.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return f.status().Silent }, poolWait, poolTick)

	f.st.receive(1, []byte{0xc1}, poolModel) // 0xc1: never valid msgpack
	require.Eventually(t, func() bool { return f.count("dropped", string(dropDecodeError)) == 1 }, poolWait, poolTick)
	st := f.status()
	require.True(t, st.Heartbeats, "still judged by its silence")
	require.False(t, st.Silent, "a message arrived")

	require.Eventually(t, func() bool { return clock.Waiters() >= 1 }, poolWait, poolTick, "the silence timer is armed")
	clock.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return f.status().Silent }, poolWait, poolTick, f.logs.String())
	require.Equal(t, 2.0, counter(f.p.sm.lv.HeartbeatTimeouts, seqID))
}
