package kvevents

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/kvroute/kvroute/replay"
)

// vLLM's replay ROUTER on libzmq with a small send high-water mark, an idle
// engine and 5,000 buffered batches: libzmq drops the replies the client has
// not taken yet, the client asks again from the first missing sequence, and
// all 5,000 batches end up applied with the endpoint live. Before, the replay
// stopped at the first hole and the endpoint went live with thousands of
// batches missing for good.
func TestPoolInteropReplayThroughRouterHWMEndsExact(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	// Whether libzmq drops replies depends on how the two processes are
	// scheduled: a client that keeps up (on a loaded machine, the sender
	// may be the slower one) takes every reply. Each attempt checks that
	// every batch is applied once whatever happened; the scenario is
	// repeated, up to a bound, until an attempt sees the ROUTER drop
	// replies. The client's handling of a hole is tested
	// deterministically without libzmq (replay_hole_test.go).
	const attempts = 4
	for i := 1; i <= attempts; i++ {
		if requests := replayThroughRouterHWM(t); requests > 1 {
			return
		}
		t.Logf("attempt %d: the ROUTER dropped no reply (one replay request)", i)
	}
	t.Logf("libzmq dropped no reply in %d attempts on this machine; every batch was applied once in each", attempts)
}

// replayThroughRouterHWM runs one attempt of the test above and returns
// how many replay requests the publisher answered.
func replayThroughRouterHWM(t *testing.T) int {
	t.Helper()
	const n = 5000
	py := pytest.Start(t, pytest.Config{Replay: true, ReplayHWM: 500, ReplaySndBuf: 8192})
	defer py.Stop()
	_, last, err := py.Hide(n) // buffered before the router starts; then idle
	require.NoError(t, err)
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{ReplayClient: replay.ClientConfig{IdleTimeout: 500 * time.Millisecond}}, ix)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: pyID, Model: poolModel, EventsAddress: py.PubAddr, ReplayAddress: py.ReplayAddr}))
	waitAppliedLogs(t, p, pyID, last, logs)
	require.Eventually(t, func() bool { return stateOf(p, pyID) == StateLive }, poolWait, poolTick, logs.String())
	requireHeldLogs(t, ix, pyID, 0, last, logs)
	st, _ := p.Status(pyID)
	require.Equal(t, uint64(n), st.Messages, "each of the 5,000 batches applied once, none missing")
	a, err := py.Status()
	require.NoError(t, err)
	t.Logf("%d batches through a ROUTER with SNDHWM 500: %d replay requests, %v holes",
		n, a.ReplayRequests, counter(p.metrics().ZMQErrors, pyID, replay.OpHole))
	return a.ReplayRequests
}
