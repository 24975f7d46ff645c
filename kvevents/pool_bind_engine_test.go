package kvevents

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
)

// Bind mode with BindAnyTopic: an endpoint first seen on the bind socket
// takes the pool's engine kind, so PoolConfig.Replay derives a replay
// address for it only as it does for an endpoint passed to Ensure: for
// vLLM (and TensorRT-LLM), never for "sglang" (whose replay socket is off
// unless configured) or "noreplay" (which has none). Before, the bind
// source derived one whatever the engine kind, and such a fleet had every
// connect replay, join probe and gap end in a failed replay.
func TestBindAnyTopicReplayFollowsEngineKind(t *testing.T) {
	for _, c := range []struct {
		engine EngineKind
		replay bool
	}{{EngineVLLM, true}, {EngineSGLang, false}, {EngineNoReplay, false}} {
		t.Run(string(c.engine), func(t *testing.T) {
			defer leakcheck.Check(t)()
			port := testport.Port(t) // nothing listens there
			ix := newPoolIndex(t)
			p, _ := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0", BindAnyTopic: true,
				Replay: true, ReplayPort: port, Engine: c.engine}, ix)
			defer p.Close()
			require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
			const id = "127.0.0.1:8600"
			e := dialEngine(t, p.bindAddr(), "kv@"+id+"@"+poolModel)
			defer e.close()
			e.publishUntil(received(p, id))
			want := ""
			if c.replay {
				want = "tcp://127.0.0.1:" + strconv.Itoa(port)
			}
			require.Equal(t, want, statusOf(p, id).Replay)
			require.NoError(t, p.Close())
		})
	}
}
