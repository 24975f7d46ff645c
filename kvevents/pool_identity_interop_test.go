package kvevents

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/kvroute/kvroute/internal/testport"
)

// vLLM's snapshot revision on real libzmq: a publisher with an identity (in
// the batch, or in the sequence frame as an earlier draft had it, or as
// SGLang's epoch after the topic, which SGLang draws as a UUID's hex) restarts
// in-process on the same ports with a new identity and publishes past the
// old watermark before the re-dial. The pool reads the identities, clears
// the old lifetime's blocks once, and holds the new lifetime's; the status
// shows the identity the publisher reports. The ports lie outside the
// ephemeral range (testport), so no other socket takes them while the
// publisher rebinds.
func TestPoolInteropPublisherIdentity(t *testing.T) {
	pytest.Require(t)
	for _, where := range []string{"payload", "frame", "topic"} {
		t.Run(where, func(t *testing.T) {
			defer leakcheck.Check(t)()
			// Heartbeats off the batches' sequences here: every sequence
			// carries its generated batch.
			py := pytest.Start(t, pytest.Config{Replay: true, Identity: where, HeartbeatEvery: time.Hour,
				PubPort: testport.Port(t), ReplayPort: testport.Port(t)})
			defer py.Stop()
			ix := newPoolIndex(t)
			p, logs := newTestPool(t, PoolConfig{MinBackoff: 200 * time.Millisecond}, ix)
			defer p.Close()
			require.NoError(t, p.Ensure(Endpoint{ID: pyID, EventsAddress: py.PubAddr, ReplayAddress: py.ReplayAddr}))
			old := pyPublishUntilReceived(t, p, py, pyID, 0)
			waitAppliedLogs(t, p, pyID, old, logs)
			first, err := py.Status()
			require.NoError(t, err)
			require.Equal(t, first.PublisherID, hex.EncodeToString(idOf(t, p)), "the identity as published")

			_, last, ok, err := py.Restart(int(old) + 6) // past the old watermark, before the re-dial
			require.NoError(t, err)
			require.True(t, ok)
			second, err := py.Status()
			require.NoError(t, err)
			require.NotEqual(t, first.PublisherID, second.PublisherID)
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
			// Replies of the draft's replay carry no identity: the next live
			// message tells it.
			waitAppliedLogs(t, p, pyID, pyPublishUntilReceived(t, p, py, pyID, last+1), logs)
			require.Equal(t, second.PublisherID, hex.EncodeToString(idOf(t, p)))
			require.Equal(t, 1.0, counter(m.PublisherRestarts, pyID), "one restart, however many checks saw it\n%s", logs)
		})
	}
}

func idOf(t *testing.T, p *Pool) []byte {
	t.Helper()
	st, ok := p.Status(pyID)
	require.True(t, ok)
	require.True(t, st.HasPublisherID, "no identity read")
	return st.PublisherID[:]
}

// An idle publisher of vLLM's snapshot revision sends empty batches and
// stays live; when its heartbeats stop while its sockets stay open (a
// wedged publisher thread: libzmq still answers the ZMTP PINGs), the
// endpoint is degraded within PublisherSilence, with its connection up, and
// live again when the heartbeats resume.
func TestPoolInteropHeartbeatsAndSilence(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	py := pytest.Start(t, pytest.Config{Replay: true, Identity: "payload", HeartbeatEvery: 200 * time.Millisecond})
	defer py.Stop()
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{PublisherSilence: time.Second}, ix)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: pyID, EventsAddress: py.PubAddr, ReplayAddress: py.ReplayAddr}))
	require.Eventually(t, func() bool {
		st := statusOf(p, pyID)
		return st.Heartbeats && st.State == StateLive && counter(p.sm.lv.Heartbeats, pyID) >= 3
	}, poolWait, poolTick, "no heartbeats: %+v\n%s", statusOf(p, pyID), logs)

	require.NoError(t, py.Heartbeats(false))
	silentAt := time.Now()
	require.Eventually(t, func() bool { return statusOf(p, pyID).State == StateDegraded }, poolWait, poolTick,
		"a silent publisher stayed %v\n%s", statusOf(p, pyID).State, logs)
	st := statusOf(p, pyID)
	require.True(t, st.Silent)
	require.True(t, st.Connected, "the socket stayed open")
	require.Equal(t, 1.0, counter(p.sm.lv.HeartbeatTimeouts, pyID))
	t.Logf("degraded %v after the heartbeats stopped (publisherSilence 1s, heartbeats every 200ms)", time.Since(silentAt))

	require.NoError(t, py.Heartbeats(true))
	require.Eventually(t, func() bool { return statusOf(p, pyID).State == StateLive }, poolWait, poolTick, logs.String())
	require.False(t, statusOf(p, pyID).Silent)
	require.NoError(t, p.Close())
}

// TensorRT-LLM's publisher format (its map events, vLLM's framing and
// current replay protocol) on real libzmq, as an endpoint of engine kind
// "trtllm": batches published before the subscription arrive by replay,
// later ones live, and every one is indexed.
func TestPoolInteropTRTLLMPublisher(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	py := pytest.Start(t, pytest.Config{Replay: true, Format: "trtllm"})
	defer py.Stop()
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	early := pyPublish(t, py, 3)
	require.NoError(t, p.Ensure(Endpoint{ID: pyID, EventsAddress: py.PubAddr, ReplayAddress: py.ReplayAddr, Engine: EngineTRTLLM}))
	waitAppliedLogs(t, p, pyID, pyPublishUntilReceived(t, p, py, pyID, early+1), logs)
	last := pyPublish(t, py, 3)
	waitAppliedLogs(t, p, pyID, last, logs)
	requireHeldLogs(t, ix, pyID, 0, last, logs)
	require.Zero(t, counter(p.metrics().Replays, pyID, replayFailed))
	require.Contains(t, logs.String(), "Requesting proactive replay on connect")
}
