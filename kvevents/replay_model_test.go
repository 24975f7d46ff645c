package kvevents

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/replay"
)

// An idle engine whose replay replies carry no topic (vLLM before the topic
// frame) and whose model is configured only pool-wide: the connect replay
// alone indexes all 10 buffered batches under that model. Before, they
// waited for a live message to name the model, and with the engine idle 0 of
// 10 were indexed.
func TestPoolLegacyReplayIdleEngineUsesConfiguredModel(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel,
		ReplayAddr: "127.0.0.1:0", ReplayLayout: replay.LayoutLegacy})
	defer pub.Close()
	last := publishN(t, pub, 10) // then idle
	p, logs := newTestPool(t, PoolConfig{Model: poolModel, TailProbeDelay: -1}, ix)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}))
	waitAppliedLogs(t, p, id, last, logs)
	requireHeldLogs(t, ix, id, 0, last, logs) // 10 of 10
	require.Zero(t, counter(p.metrics().MessagesReceived, id), "nothing arrived live")
	require.Contains(t, logs.String(), "layout=legacy")
	require.NoError(t, p.Close())
}

// The same through vLLM's libzmq publisher with the legacy reply layout.
func TestPoolInteropLegacyReplayIdleEngineUsesConfiguredModel(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	py := pytest.Start(t, pytest.Config{Replay: true, Layout: "legacy", BatchShape: "map"})
	defer py.Stop()
	last := pyPublish(t, py, 10) // then idle
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{Model: poolModel, TailProbeDelay: -1}, ix)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: pyID, EventsAddress: py.PubAddr, ReplayAddress: py.ReplayAddr}))
	waitAppliedLogs(t, p, pyID, last, logs)
	requireHeldLogs(t, ix, pyID, 0, last, logs) // 10 of 10
	require.Zero(t, counter(p.metrics().MessagesReceived, pyID), "nothing arrived live")
}

// A live message the receiver saw while the connect replay waited (held
// behind it) names the model: the legacy replies are applied under it
// directly, with no guess to undo.
func TestStreamLegacyReplayUsesModelSeenLive(t *testing.T) {
	defer leakcheck.Check(t)()
	lim := replay.NewLimiter(1)
	release := hogSlots(t, lim)
	defer release()

	buf := replay.NewBuffer(100)
	srv, err := replay.NewServer(replay.ServerConfig{Addr: "127.0.0.1:0", Layout: replay.LayoutLegacy}, buf, replay.Options{})
	require.NoError(t, err)
	defer srv.Close()
	f := newSeqFixture(t, PoolConfig{TailProbeDelay: -1, ReplayGrace: time.Minute,
		ReplayClient: replay.ClientConfig{Limiter: lim}}, 0, srv.Endpoint())
	defer f.close()
	f.st.mu.Lock()
	f.st.s.model, f.st.cfgModel = "", ""
	f.st.mu.Unlock()
	for s := range uint64(4) {
		buf.Add(s, nil, poolPayload(s))
	}
	f.st.onConnect(false) // waits for the slot
	f.st.receive(4, poolPayload(4), poolModel)
	require.Eventually(t, func() bool {
		f.st.mu.Lock()
		defer f.st.mu.Unlock()
		return len(f.st.s.held) == 1
	}, poolWait, poolTick)
	release() // the slot frees
	f.wait(4)
	requireHeld(t, f.ix, seqID, 0, 4)
	require.Zero(t, f.count("dropped", string(dropModelMismatch)))
	require.Equal(t, 1.0, f.count("replays", replayComplete), f.logs.String())
}
