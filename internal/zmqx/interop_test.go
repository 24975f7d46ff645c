package zmqx

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/stretchr/testify/require"
)

// Interop with a real libzmq publisher (testdata/vllm_publisher.py): the guard
// accepts libzmq's handshake, passes 1 MiB frames, and libzmq heartbeat PINGs
// are skipped by Recv. Skipped without python3-zmq unless
// KVROUTE_REQUIRE_INTEROP=1.
func TestInteropLibzmqPublisherThroughGuard(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	p := pytest.Start(t, pytest.Config{HeartbeatIvl: 100 * time.Millisecond})
	defer p.Stop()

	s := NewSub(context.Background(), Options{IdleTimeout: 5 * time.Second}, nil)
	defer CloseDrain(s)
	require.NoError(t, s.SetOption(zmq4.OptionSubscribe, "kv@"))
	require.NoError(t, Dial(s, p.PubAddr))
	require.Eventually(t, func() bool {
		st, err := p.Status()
		return err == nil && st.Subscribers == 1
	}, 10*time.Second, 20*time.Millisecond)

	payload := bytes.Repeat([]byte{0x5a}, 1<<20)
	type res struct {
		m       zmq4.Msg
		skipped int
		err     error
	}
	got := make(chan res, 1)
	go func() {
		m, skipped, err := Recv(s)
		got <- res{m, skipped, err}
	}()
	// Publish until the subscription has reached libzmq (slow joiner).
	var r res
	deadline := time.After(10 * time.Second)
wait:
	for {
		_, _, err := p.PublishPayloads(payload)
		require.NoError(t, err)
		select {
		case r = <-got:
			break wait
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("nothing received from libzmq")
		}
	}
	require.NoError(t, r.err)
	require.Len(t, r.m.Frames, 3)
	require.Equal(t, "kv@127.0.0.1:8000@test-model", string(r.m.Frames[0]))
	require.Len(t, r.m.Frames[1], 8)
	require.True(t, bytes.Equal(payload, r.m.Frames[2]))

	// go-zeromq never answers PING, so libzmq drops the connection after its
	// heartbeat timeout; until then the PINGs surface as commands that Recv
	// skips (spec/zmq.md S12).
	skipped := r.skipped
	for skipped == 0 {
		m, n, err := Recv(s)
		skipped += n
		if err != nil {
			break
		}
		require.Len(t, m.Frames, 3)
		_ = binary.BigEndian.Uint64(m.Frames[1])
	}
	require.Positive(t, skipped, "heartbeat PINGs were skipped")
}
