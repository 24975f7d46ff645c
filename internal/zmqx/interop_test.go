package zmqx

import (
	"bytes"
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/stretchr/testify/require"
)

// Interop with a real libzmq publisher (testdata/vllm_publisher.py): the guard
// accepts libzmq's handshake, passes 1 MiB frames, and answers libzmq's
// heartbeat PINGs without delivering them. Skipped without python3-zmq unless
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
		m   zmq4.Msg
		err error
	}
	got := make(chan res, 1)
	go func() {
		m, _, err := Recv(s)
		got <- res{m, err}
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
	// PONG as it reads it, whether or not Recv is called, so the
	// connection survives many timeouts: 12 PONGs go out and the next
	// message is received on the same connection (go-zeromq does not
	// reconnect it). Before PONG answering this failed with EOF after one
	// timeout. (A 100 ms interval, 300 ms timeout, also failed with two
	// suites running: the reader was descheduled past libzmq's deadline.)
	pongs := PongsSent()
	require.Eventually(t, func() bool { return PongsSent() >= pongs+12 }, 60*time.Second, 10*time.Millisecond,
		"12 PINGs of libzmq answered")
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

// A libzmq publisher with heartbeats (IVL 300 ms, timeout 900 ms) keeps a
// SUB whose owner reads nothing while it publishes 8 MiB, far more than
// go-zeromq's queue and the 1 MiB read-ahead hold: its PINGs are answered
// behind the flood, the messages that did not fit are counted, and the
// connection still delivers once the owner reads again (go-zeromq does not
// reconnect it). Before, the PINGs stayed unread behind the flood and
// libzmq dropped the connection.
func TestInteropLibzmqHeartbeatsAnsweredWhileOwnerIsNotReading(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	p := pytest.Start(t, pytest.Config{HeartbeatIvl: 300 * time.Millisecond})
	defer p.Stop()
	var dropped atomic.Uint64
	o := Options{ReadAheadBytes: 1 << 20, OnDrop: func() { dropped.Add(1) }}
	s := NewSub(context.Background(), o, nil)
	defer CloseDrain(s)
	require.NoError(t, s.SetOption(zmq4.OptionSubscribe, "kv@"))
	require.NoError(t, Dial(s, p.PubAddr))
	require.Eventually(t, func() bool {
		st, err := p.Status()
		return err == nil && st.Subscribers == 1
	}, 10*time.Second, 20*time.Millisecond)
	// recvPayload publishes payload until it is received (the first time:
	// the subscription reaching libzmq, ZeroMQ's slow joiner), skipping
	// the messages before it.
	recvPayload := func(payload []byte) {
		t.Helper()
		got := make(chan error, 1)
		go func() {
			for {
				m, _, err := Recv(s)
				if err != nil || (len(m.Frames) == 3 && bytes.Equal(m.Frames[2], payload)) {
					got <- err
					return
				}
			}
		}()
		deadline := time.After(20 * time.Second)
		for {
			_, _, err := p.PublishPayloads(payload)
			require.NoError(t, err)
			select {
			case err := <-got:
				require.NoError(t, err)
				return
			case <-time.After(100 * time.Millisecond):
			case <-deadline:
				t.Fatalf("%q not received from libzmq", payload)
			}
		}
	}
	recvPayload([]byte("probe"))

	flood := bytes.Repeat([]byte{0x5a}, 256<<10)
	for range 4 {
		_, _, err := p.PublishPayloads(flood, flood, flood, flood, flood, flood, flood, flood)
		require.NoError(t, err)
	}
	pongs := PongsSent()
	require.Eventually(t, func() bool { return PongsSent() >= pongs+6 }, 30*time.Second, 10*time.Millisecond,
		"libzmq's PINGs answered while the owner reads nothing")
	require.NotZero(t, dropped.Load(), "8 MiB do not fit go-zeromq's queue and 1 MiB of read-ahead")
	recvPayload([]byte("after the flood"))
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
