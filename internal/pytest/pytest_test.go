package pytest

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/stretchr/testify/require"
)

func TestConfigArgs(t *testing.T) {
	a := Config{PubPort: 5556, Replay: true, Layout: "legacy", StartSeq: 7, HeartbeatIvl: 500 * time.Millisecond}.args()
	require.Equal(t, []string{ScriptPath(), "--pub-port", "5556", "--replay", "--layout", "legacy",
		"--start-seq", "7", "--heartbeat-ivl", "500"}, a)
	require.Equal(t, "vllm_publisher.py", filepath.Base(ScriptPath()))
	a = Config{Identity: "payload", HeartbeatEvery: 250 * time.Millisecond, Format: "trtllm"}.args()
	require.Equal(t, []string{ScriptPath(), "--identity", "payload", "--heartbeat-every", "0.25", "--format", "trtllm"}, a)
}

func TestPublisherLifecycle(t *testing.T) {
	defer leakcheck.Check(t)()
	p := Start(t, Config{Replay: true})
	defer p.Stop()
	require.NotZero(t, p.PubPort)
	require.NotZero(t, p.ReplayPort)

	sub := zmqx.NewSub(context.Background(), zmqx.Options{IdleTimeout: 10 * time.Second}, nil)
	defer zmqx.CloseDrain(sub)
	require.NoError(t, sub.SetOption(zmq4.OptionSubscribe, "kv@"))
	require.NoError(t, zmqx.Dial(sub, p.PubAddr))
	require.Eventually(t, func() bool {
		st, err := p.Status()
		return err == nil && st.Subscribers == 1
	}, 10*time.Second, 20*time.Millisecond)

	// The subscription may still be in flight (slow joiner): publish until
	// the first message arrives, then check the sequence framing.
	got := make(chan zmq4.Msg, 1)
	go func() {
		m, err := sub.Recv()
		if err == nil {
			got <- m
		}
		close(got)
	}()
	var m zmq4.Msg
	deadline := time.After(10 * time.Second)
wait:
	for {
		_, _, err := p.Publish(1)
		require.NoError(t, err)
		select {
		case m = <-got:
			break wait
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("no message from the libzmq publisher")
		}
	}
	require.Len(t, m.Frames, 3)
	require.Equal(t, "kv@127.0.0.1:8000@test-model", string(m.Frames[0]))
	require.Len(t, m.Frames[1], 8)
	seq := binary.BigEndian.Uint64(m.Frames[1])

	first, last, err := p.Publish(3)
	require.NoError(t, err)
	require.Greater(t, first, seq)
	require.Equal(t, first+2, last)
	_, err = p.Command("bogus")
	require.Error(t, err)

	require.NoError(t, p.Signal(syscall.SIGSTOP))
	require.NoError(t, p.Signal(syscall.SIGCONT))
	st, err := p.Status()
	require.NoError(t, err)
	require.Equal(t, last+1, st.NextSeq)
	require.NoError(t, p.Stop())
	require.NoError(t, p.Stop(), "idempotent")
}

func TestKillStoppedPublisher(t *testing.T) {
	defer leakcheck.Check(t)()
	p := Start(t, Config{})
	defer p.Stop()
	require.NoError(t, p.Signal(syscall.SIGSTOP))
	require.NoError(t, p.Kill())
	_, err := p.Status()
	require.Error(t, err)
}
