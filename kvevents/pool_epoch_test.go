package kvevents

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/telemetry"
)

// SGLang epochs as its publisher draws them by default (uuid4().hex).
const (
	sglEpochA = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	sglEpochB = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
)

// sglTopic is SGLang's live topic with snapshots on: the configured topic,
// then "\x00sgl-kv-epoch=<epoch>" (its _live_topic), and for a snapshot
// barrier "\x00sgl-kv-snapshot=<barrier id>" after that.
func sglTopic(endpoint, epoch, barrier string) []byte {
	t := "kv@" + endpoint + "@" + poolModel + "\x00sgl-kv-epoch=" + epoch
	if barrier != "" {
		t += "\x00sgl-kv-snapshot=" + barrier
	}
	return []byte(t)
}

// sglPayload is batch seq of the shared layout as SGLang writes it (map
// events, attn_dp_rank 0).
func sglPayload(seq uint64) []byte {
	return wire.AppendBatch(nil, poolBatch(seq, poolBlocks), wire.FormatSGLangMap)
}

// sglBarrier is the empty batch SGLang publishes where a snapshot is cut.
func sglBarrier() []byte {
	return wire.AppendBatch(nil, &wire.Batch{TS: 1, HasDPRank: true}, wire.FormatSGLangMap)
}

// SGLang with snapshots on names its publisher's lifetime in the topic. A
// new epoch is an engine restart even when the sequence goes on past the
// old watermark (the engine restarted while the subscriber was away, and
// its new lifetime already published more than the old one had): the
// endpoint is cleared, the restart counted once, the new lifetime's
// batches are its entries and the status shows the new epoch. Before, the
// epoch was stripped with the rest of the topic's metadata, the new
// lifetime's batches were applied as a continuation and the old lifetime's
// blocks stayed in the index.
func TestPoolSGLangTopicEpochIsARestart(t *testing.T) {
	defer leakcheck.Check(t)()
	const id = "10.0.0.9:8000"
	pub := newTestPublisher(t, zmqpub.Config{Topic: string(sglTopic(id, sglEpochA, ""))})
	defer pub.Close()
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: id, EventsAddress: pub.Endpoint()}))

	var old uint64
	require.Eventually(t, func() bool {
		seq, err := pub.Publish(sglPayload(pub.Stats().Published))
		require.NoError(t, err)
		old = seq
		return statusOf(p, id).Received
	}, poolWait, 20*time.Millisecond, "endpoint received nothing")
	waitAppliedLogs(t, p, id, old, logs)
	require.Equal(t, poolBlocks, heldBlocks(ix, id, old))
	st := statusOf(p, id)
	require.True(t, st.HasPublisherID)
	require.Equal(t, sglEpochA, hex.EncodeToString(st.PublisherID[:]), "the epoch SGLang drew")
	require.False(t, st.Heartbeats, "SGLang sends no idle heartbeats")

	// The engine restarted: a new epoch, and a sequence past the old one.
	var last uint64
	for s := old + 1; s <= old+3; s++ {
		seq, err := pub.PublishTopic(sglTopic(id, sglEpochB, ""), sglPayload(s))
		require.NoError(t, err)
		last = seq
	}
	waitAppliedLogs(t, p, id, last, logs)
	m := p.metrics()
	require.Equal(t, 1.0, counter(m.PublisherRestarts, id), logs.String())
	require.Equal(t, 1.0, counter(p.sm.lv.IdentityChanges, id))
	for s := uint64(0); s <= old; s++ {
		require.Zero(t, heldBlocks(ix, id, s), "batch %d of the old lifetime survived\n%s", s, logs)
	}
	requireHeldLogs(t, ix, id, old+1, last, logs)
	st = statusOf(p, id)
	require.Equal(t, sglEpochB, hex.EncodeToString(st.PublisherID[:]))
	require.Equal(t, StateLive, st.State)
	require.Equal(t, 1, logs.count("new publisher identity"), logs.String())
}

// An SGLang snapshot barrier (an empty batch on the barrier topic) is not
// an idle heartbeat, and SGLang's epoch comes without heartbeats: an idle
// SGLang endpoint is never judged by its silence. Before, the barrier was
// taken for vLLM's heartbeat and the endpoint went degraded PublisherSilence
// after it while the engine was merely idle.
func TestStreamSGLangBarrierIsNotAHeartbeat(t *testing.T) {
	defer leakcheck.Check(t)()
	clock := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	f := newClockFixture(t, PoolConfig{PublisherSilence: time.Second}, clock)
	defer f.close()
	before := clock.Waiters()
	receive := func(seq uint64, topic, payload []byte) {
		fr := [][]byte{topic, make([]byte, 8), payload}
		fr[1][7] = byte(seq)
		s, ok := parseLive(fr)
		require.True(t, ok)
		f.st.receiveFrame(s, fr[1][8:], topicMetaOf(fr[0]), fr[2], poolModel)
	}
	receive(0, sglTopic(seqID, sglEpochA, ""), sglPayload(0))
	receive(1, sglTopic(seqID, sglEpochA, "9b1f"), sglBarrier())
	receive(2, sglTopic(seqID, sglEpochA, ""), sglPayload(2))
	receive(3, sglTopic(seqID, sglEpochA, "77aa"), sglBarrier())
	f.wait(3)
	require.True(t, f.held(0))
	require.True(t, f.held(2))
	require.Equal(t, before, clock.Waiters(), "no silence timer")
	require.Zero(t, counter(f.p.sm.lv.Heartbeats, seqID), "barriers are not heartbeats")
	clock.Advance(time.Hour)
	st := f.status()
	require.False(t, st.Heartbeats)
	require.False(t, st.Silent)
	require.Equal(t, StateLive, st.State)
	require.Zero(t, counter(f.p.sm.lv.HeartbeatTimeouts, seqID))
	require.Equal(t, sglEpochA, hex.EncodeToString(st.PublisherID[:]))
	require.Zero(t, f.count("restarts"))
}

// epochIdentity: SGLang's default epoch (32 hex digits) is its UUID's
// bytes; any other epoch is hashed, and two epochs never share an identity
// by accident of their form.
func TestEpochIdentity(t *testing.T) {
	a := epochIdentity([]byte(sglEpochA))
	require.Equal(t, sglEpochA, hex.EncodeToString(a[:]))
	r1, r2 := epochIdentity([]byte("replica-epoch-1")), epochIdentity([]byte("replica-epoch-2"))
	require.NotEqual(t, *r1, *r2)
	require.Equal(t, *r1, *epochIdentity([]byte("replica-epoch-1")))
	notHex := epochIdentity([]byte("zz1e2d3c4b5a69788796a5b4c3d2e1f0"))
	require.NotEqual(t, *a, *notHex)
	require.Nil(t, topicMetaOf([]byte("kv@a@m")).epoch, "vLLM's topics carry none")
}

// Bind mode (SGLang's PUB connects to the router): the epoch is read from
// each message's topic as in dial mode, so a new epoch on the same
// connection, with the sequence going on, restarts the endpoint.
func TestBindSGLangTopicEpochIsARestart(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0"}, ix)
	defer p.Close()
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id}))
	e := dialEngine(t, p.bindAddr(), string(sglTopic(id, sglEpochA, "")))
	defer e.close()
	old := e.publishUntil(received(p, id))
	waitAppliedLogs(t, p, id, old, logs)
	st := statusOf(p, id)
	require.Equal(t, sglEpochA, hex.EncodeToString(st.PublisherID[:]))

	e.topic = sglTopic(id, sglEpochB, "")
	last := e.publishN(2)
	waitAppliedLogs(t, p, id, last, logs)
	require.Equal(t, 1.0, counter(p.metrics().PublisherRestarts, id), logs.String())
	for s := uint64(0); s <= old; s++ {
		require.Zero(t, heldBlocks(ix, id, s), "batch %d of the old lifetime survived\n%s", s, logs)
	}
	requireHeldLogs(t, ix, id, old+1, last, logs)
	st = statusOf(p, id)
	require.Equal(t, sglEpochB, hex.EncodeToString(st.PublisherID[:]))
	require.NoError(t, p.Close())
}
