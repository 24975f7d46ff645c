package zmqx

import (
	"bytes"
	"context"
	"syscall"
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
	p := pytest.Start(t, pytest.Config{HeartbeatIvl: 300 * time.Millisecond})
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

	// libzmq pings every 300 ms and drops a peer silent for 900 ms after a
	// PING (HEARTBEAT_TIMEOUT = 3 × IVL). The guard answers each PING with
	// PONG as it reads it, so the connection survives many timeouts: 12
	// PINGs (skipped by Recv) arrive on the same connection and the next
	// message is received. Before PONG answering this failed with EOF after
	// one timeout. (A 100 ms interval, 300 ms timeout, also failed with two
	// suites running: the reader was descheduled past libzmq's deadline.)
	pings := r.skipped
	for pings < 12 {
		m, err := s.Recv()
		require.NoError(t, err, "libzmq dropped the subscriber after %d PINGs", pings)
		if IsCommand(m) {
			pings++
		}
	}
	_, _, err := p.PublishPayloads([]byte("after the pings"))
	require.NoError(t, err)
	// The slow-joiner loop above may have published the probe more than
	// once; a copy still on its way is skipped, anything else fails.
	for {
		m, _, err := Recv(s)
		require.NoError(t, err)
		require.Len(t, m.Frames, 3)
		if bytes.Equal(m.Frames[2], payload) {
			continue
		}
		require.Equal(t, "after the pings", string(m.Frames[2]))
		break
	}
}

// A frozen libzmq publisher (SIGSTOP: its kernel keeps the TCP connection
// open, so no error ever arrives) is detected by the subscriber's own PINGs
// within the heartbeat timeout, and the same publisher is usable again after
// SIGCONT. Without heartbeats only the 60 s idle deadline noticed it.
func TestInteropFrozenPublisherDetectedByHeartbeat(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	p := pytest.Start(t, pytest.Config{})
	defer p.Stop()
	const ivl, timeout = 200 * time.Millisecond, time.Second
	o := Options{HeartbeatInterval: ivl, HeartbeatTimeout: timeout}
	s := NewSub(context.Background(), o, nil)
	defer CloseDrain(s)
	require.NoError(t, s.SetOption(zmq4.OptionSubscribe, ""))
	require.NoError(t, Dial(s, p.PubAddr))
	// libzmq answers our PINGs: the connection outlives several timeouts.
	require.Eventually(t, func() bool {
		st, err := p.Status()
		return err == nil && st.Subscribers == 1
	}, 10*time.Second, 20*time.Millisecond)
	got := make(chan error, 1)
	go func() {
		_, _, err := Recv(s)
		got <- err
	}()
	require.NoError(t, p.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	defer func() { _ = p.Signal(syscall.SIGCONT) }()
	select {
	case err := <-got:
		t.Logf("frozen publisher detected after %v (interval %v, timeout %v)", time.Since(stopped), ivl, timeout)
		require.True(t, isGuardErr(err, ErrPeerDead), "got %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("frozen publisher not detected")
	}
	require.NoError(t, p.Signal(syscall.SIGCONT))
	_, err := p.Status()
	require.NoError(t, err, "the publisher runs again")
}
