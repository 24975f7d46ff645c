package kvevents

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqpub"
)

// A Go publisher with a replay socket → pool → index: batches published
// before the subscription existed arrive through the proactive replay on
// connect, later ones live, and every block becomes matchable.
func TestPoolGoPublisherToIndex(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel, ReplayAddr: "127.0.0.1:0"})
	defer pub.Close()
	early := publishN(t, pub, 5) // nobody listens yet: only replay can deliver these

	p, logs := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}))
	require.Greater(t, publishUntilReceived(t, p, pub, id), early)
	last := publishN(t, pub, 20)
	waitApplied(t, p, id, last)
	requireHeld(t, ix, id, 0, last)

	m := p.metrics()
	require.Equal(t, 1, logs.count("Requesting proactive replay on connect"), logs.String())
	require.GreaterOrEqual(t, logs.count("Replay complete"), 1, logs.String())
	require.GreaterOrEqual(t, counter(m.Replays, id, replayComplete), 1.0)
	require.Zero(t, counter(m.Replays, id, replayFailed))
	require.GreaterOrEqual(t, counter(m.MessagesReceived, id), 21.0, "the first live message and the 20 after it")
	require.Zero(t, counter(m.PublisherRestarts, id))
	st, ok := p.Status(id)
	require.True(t, ok)
	require.True(t, st.Connected)
	require.Equal(t, last+1, st.Messages, "each batch applied exactly once")

	require.NoError(t, p.Close())
	require.NoError(t, pub.Close())
}

// An idle engine publishes nothing, so an endpoint whose model is known is
// replayed as soon as it is subscribed: what the engine cached before the
// router started is indexed without waiting for the engine's next batch.
func TestPoolReplaysIdleEngineOnConnect(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel, ReplayAddr: "127.0.0.1:0"})
	defer pub.Close()
	last := publishN(t, pub, 4) // then the engine goes idle

	p, logs := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}))
	waitApplied(t, p, id, last)
	requireHeld(t, ix, id, 0, last)
	require.Equal(t, 1, logs.count("Requesting proactive replay on connect"), logs.String())
	require.Equal(t, 1.0, counter(p.metrics().Replays, id, replayComplete))
	require.Zero(t, counter(p.metrics().MessagesReceived, id), "nothing arrived live")

	// Live batches after that continue the same watermark. They may be
	// published before the publisher has processed the SUB's subscription
	// (slow joiner) and so never be sent; the engine then idles and nothing
	// reveals the loss. This made the test fail under load ("never applied
	// seq 6"); the tail probe now repairs such a lost tail.
	next := publishN(t, pub, 3)
	waitApplied(t, p, id, next)
	requireHeld(t, ix, id, 0, next)
	st, _ := p.Status(id)
	require.Equal(t, next+1, st.Messages, "each batch applied exactly once")
	require.NoError(t, p.Close())
	require.NoError(t, pub.Close())
}

// The replay's log says what was applied: an engine whose only batch is
// its first (sequence 0) is replayed into the index, and the log line says
// so with the watermark and the count of batches applied rather than
// "applied=0".
func TestPoolReplayLogSaysWhatWasApplied(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel, ReplayAddr: "127.0.0.1:0"})
	defer pub.Close()
	last := publishN(t, pub, 1)
	require.Zero(t, last)

	p, logs := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}))
	waitApplied(t, p, id, last)
	requireHeld(t, ix, id, 0, last)
	require.Eventually(t, func() bool { return logs.count("Replay complete") == 1 }, poolWait, poolTick)
	var line string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "Replay complete") {
			line = strings.TrimSpace(l) + " "
		}
	}
	require.Contains(t, line, " batches=1 ")
	require.Contains(t, line, " applied_seq=0 ")
	require.Contains(t, line, " messages_applied=1")
	require.NotContains(t, line, " applied=")
	require.NoError(t, p.Close())
	require.NoError(t, pub.Close())
}

// Statuses is every endpoint's Status at once, sorted by ID; a removed
// endpoint leaves it.
func TestPoolStatusesListsEveryStream(t *testing.T) {
	defer leakcheck.Check(t)()
	p, _ := newTestPool(t, PoolConfig{}, newPoolIndex(t))
	defer p.Close()
	require.Empty(t, p.Statuses())
	// Nothing listens at the events address: both streams stay connecting.
	for _, id := range []string{"127.0.0.1:8002", "127.0.0.1:8001"} {
		require.NoError(t, p.Ensure(Endpoint{ID: id, EventsAddress: "tcp://127.0.0.1:1", ReplayAddress: "tcp://127.0.0.1:1"}))
	}
	sts := p.Statuses()
	require.Len(t, sts, 2)
	require.Equal(t, []string{sts[0].ID, sts[1].ID}, p.Endpoints())
	for _, st := range sts {
		require.Equal(t, StateConnecting, st.State)
		require.Equal(t, "tcp://127.0.0.1:1", st.Replay)
	}
	p.Remove("127.0.0.1:8001")
	sts = p.Statuses()
	require.Len(t, sts, 1)
	require.Equal(t, "127.0.0.1:8002", sts[0].ID)
	require.NoError(t, p.Close())
}
