package zmqx

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/stretchr/testify/require"
)

// A fake PUB that pings the SUB and waits for PONG. go-zeromq alone never
// answers, so before the fix the PONG never came and libzmq dropped kvroute.
func TestSubAnswersPeerPingWithPong(t *testing.T) {
	defer leakcheck.Check(t)()
	pong := make(chan []byte, 1)
	srv := startFakeServer(t, func(c net.Conn) {
		if handshakeAs(c, "PUB", true) != nil {
			return
		}
		// TTL 3 s (30 ds), context "ctx-42".
		if _, err := c.Write(zmtpCommand("PING", append([]byte{0, 30}, "ctx-42"...))); err != nil {
			return
		}
		for {
			fl, body, err := readFrame(c)
			if err != nil {
				return
			}
			if fl&flagCommand != 0 {
				if name, rest := commandName(body); name == "PONG" {
					pong <- rest
					return
				}
			}
		}
	})
	defer srv.Stop()
	s := NewSub(context.Background(), Options{}, nil)
	defer CloseDrain(s)
	require.NoError(t, s.SetOption(zmq4.OptionSubscribe, ""))
	require.NoError(t, Dial(s, srv.Addr()))
	select {
	case ctx := <-pong:
		require.Equal(t, "ctx-42", string(ctx), "PONG echoes the PING context")
	case <-time.After(10 * time.Second):
		t.Fatal("no PONG for the peer's PING")
	}
}

// pingPeer is a fake PUB that counts the PINGs it receives and answers them
// only while answer is set.
type pingPeer struct {
	srv    *fakeServer
	pings  atomic.Int64
	answer atomic.Bool
	got    chan struct{}
}

func startPingPeer(t *testing.T, answer bool) *pingPeer {
	p := &pingPeer{got: make(chan struct{}, 1024)}
	p.answer.Store(answer)
	p.srv = startFakeServer(t, func(c net.Conn) {
		if handshakeAs(c, "PUB", true) != nil {
			return
		}
		for {
			fl, body, err := readFrame(c)
			if err != nil {
				return
			}
			if fl&flagCommand == 0 {
				continue
			}
			if name, _ := commandName(body); name == "PING" {
				p.pings.Add(1)
				if p.answer.Load() {
					if _, err := c.Write(zmtpCommand("PONG", nil)); err != nil {
						return
					}
				}
				p.got <- struct{}{}
			}
		}
	})
	return p
}

// A peer that keeps answering PINGs stays connected however long it sends no
// message: quiet is not dead.
func TestHeartbeatKeepsQuietPeerAlive(t *testing.T) {
	defer leakcheck.Check(t)()
	peer := startPingPeer(t, true)
	defer peer.srv.Stop()
	// The timeout (3 s) is what a late PONG may take: the peer's goroutine
	// and the SUB's reader can each be descheduled for a while on a loaded
	// machine (1 s was seen to pass under a full race-enabled suite).
	o := Options{HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 3 * time.Second}
	s := NewSub(context.Background(), o, nil)
	defer CloseDrain(s)
	require.NoError(t, Dial(s, peer.srv.Addr()))
	errc := make(chan error, 1)
	go func() {
		_, _, err := Recv(s) // only commands (PONGs) arrive; Recv skips them
		errc <- err
	}()
	// 40 answered PINGs span more than one heartbeat timeout: the timer the
	// first PING armed fires, finds PONGs read, and the next PING re-arms it.
	for range 40 {
		select {
		case <-peer.got:
		case err := <-errc:
			t.Fatalf("a quiet peer that answers PINGs was dropped: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("no PING sent")
		}
	}
	select {
	case err := <-errc:
		t.Fatalf("dropped: %v", err)
	default:
	}
	_ = s.Close()
	<-errc
}

// A peer that stops answering (a frozen process) fails the connection with
// ErrPeerDead: the SUB's Recv returns instead of waiting forever.
func TestHeartbeatDetectsSilentPeer(t *testing.T) {
	defer leakcheck.Check(t)()
	peer := startPingPeer(t, false)
	defer peer.srv.Stop()
	o := Options{HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond}
	s := NewSub(context.Background(), o, nil)
	defer CloseDrain(s)
	require.NoError(t, Dial(s, peer.srv.Addr()))
	_, err := recvTimeout(t, s, 20*time.Second)
	require.Error(t, err)
	require.True(t, isGuardErr(err, ErrPeerDead), "got %v", err)
	require.Positive(t, peer.pings.Load())
}

// A PING is never written inside a message: go-zeromq writes a frame's
// header and body with separate writes.
func TestCommandWaitsForMessageBoundary(t *testing.T) {
	var w wscan
	w.greeting = greetingLen
	w.scan(make([]byte, greetingLen))
	require.False(t, w.atBoundary(), "before READY")
	w.scan(zmtpCommand("READY", readyProps("Socket-Type", "SUB")))
	require.True(t, w.atBoundary())
	msg := zmtpMessage([]byte("topic"), make([]byte, 300))
	for i := range msg[:len(msg)-1] {
		w.scan(msg[i : i+1])
		require.False(t, w.atBoundary(), "inside the message at byte %d", i)
	}
	w.scan(msg[len(msg)-1:])
	require.True(t, w.atBoundary())
}

func TestHeartbeatOptionsValidate(t *testing.T) {
	require.Error(t, Options{HeartbeatInterval: -1}.Validate())
	require.Error(t, Options{HeartbeatTimeout: -1}.Validate())
	o := Options{HeartbeatInterval: time.Second}.withDefaults()
	require.Equal(t, 2*time.Second, o.HeartbeatTimeout)
	require.True(t, errors.Is(&GuardError{Err: ErrPeerDead}, ErrPeerDead))
}
