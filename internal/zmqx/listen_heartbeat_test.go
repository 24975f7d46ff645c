package zmqx

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/pytest"
)

// readMsgAsync runs c.ReadMsg until it returns a message that is not a
// command, or an error, and delivers that error (nil for a message).
func readMsgAsync(c *Conn) <-chan error {
	errc := make(chan error, 1)
	go func() {
		for {
			m, err := c.ReadMsg()
			if err != nil || !m.Command {
				errc <- err
				return
			}
		}
	}()
	return errc
}

// A client that completes the handshake, sends a message and then goes
// silent (a frozen engine whose kernel keeps the TCP connection open) is
// dropped by the Listener's own PINGs: ReadMsg fails with ErrPeerDead
// instead of blocking until TCP keepalive, or forever.
func TestListenerHeartbeatDropsSilentClient(t *testing.T) {
	defer leakcheck.Check(t)()
	o := Options{HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond}
	l, err := Listen(context.Background(), "127.0.0.1:0", zmq4.Sub, o, nil)
	require.NoError(t, err)
	defer l.Close()
	raw := dialRaw(t, l.Addr().String())
	defer raw.Close()
	require.NoError(t, handshakeAs(raw, "PUB", false))
	c, err := l.Accept()
	require.NoError(t, err)
	defer c.Close()
	_, err = raw.Write(zmtpMessage([]byte("kv@p@m"), make([]byte, 8), []byte("x")))
	require.NoError(t, err)
	m, err := c.ReadMsg()
	require.NoError(t, err)
	require.Equal(t, "x", string(m.Frames[2]))

	select {
	case err := <-readMsgAsync(c):
		require.True(t, isGuardErr(err, ErrPeerDead), "got %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("a silent client was never dropped")
	}
	require.Positive(t, c.PingsSent())
	// The client sees the PINGs it ignored, then the close.
	var pings int
	for {
		fl, body, err := readFrame(raw)
		if err != nil {
			break
		}
		if name, _ := commandName(body); fl&flagCommand != 0 && name == "PING" {
			pings++
		}
	}
	require.Positive(t, pings)
}

// A client that answers PINGs stays connected however long it sends no
// message, and the PINGs never split a message the Listener writes.
func TestListenerHeartbeatKeepsAnsweringClient(t *testing.T) {
	defer leakcheck.Check(t)()
	// The timeout (1 s) is what a late PONG may take: the client's
	// goroutine and the Listener's reader can each be descheduled for a
	// while on a loaded machine.
	o := Options{HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Second}
	l, err := Listen(context.Background(), "127.0.0.1:0", zmq4.Sub, o, nil)
	require.NoError(t, err)
	defer l.Close()
	raw := dialRaw(t, l.Addr().String())
	defer raw.Close()
	require.NoError(t, handshakeAs(raw, "PUB", false))
	c, err := l.Accept()
	require.NoError(t, err)
	defer c.Close()
	errc := readMsgAsync(c)

	// The client answers 35 PINGs (more than 3 heartbeat timeouts); after
	// each one the Listener writes a few messages, concurrently with its
	// next PINGs, and every frame the client reads is whole.
	more := make(chan struct{}, 64)
	writes := make(chan error, 1)
	stop := make(chan struct{})
	stopWriter := sync.OnceFunc(func() { close(stop) })
	defer stopWriter()
	go func() {
		for {
			select {
			case <-stop:
				writes <- nil
				return
			case <-more:
			}
			for range 3 {
				if err := c.WriteMsg([]byte{1}, make([]byte, 700)); err != nil {
					writes <- err
					return
				}
			}
		}
	}()
	pings, msgs := 0, 0
	require.NoError(t, raw.SetReadDeadline(time.Now().Add(30*time.Second))) // fail, never hang
	for pings < 35 {
		fl, body, err := readFrame(raw)
		require.NoError(t, err)
		if fl&flagCommand == 0 {
			if fl&flagMore == 0 {
				require.Len(t, body, 700)
				msgs++
			}
			continue
		}
		name, _ := commandName(body)
		require.Equal(t, "PING", name)
		pings++
		_, err = raw.Write(zmtpCommand("PONG", nil))
		require.NoError(t, err)
		more <- struct{}{}
	}
	require.Positive(t, msgs)
	stopWriter()
	require.NoError(t, <-writes)
	select {
	case err := <-errc:
		t.Fatalf("a client that answers PINGs was dropped: %v", err)
	default:
	}
	_, err = raw.Write(zmtpMessage([]byte("kv@p@m"), make([]byte, 8), []byte("still here")))
	require.NoError(t, err)
	require.NoError(t, <-errc)
}

// The bind-mode topology with a real libzmq engine: a libzmq PUB that
// connects to the Listener answers its PINGs by itself and keeps its
// connection across many heartbeat timeouts; frozen with SIGSTOP (its
// kernel keeps the connection open) it is dropped with ErrPeerDead.
// Skipped without python3-zmq unless KVROUTE_REQUIRE_INTEROP=1.
func TestInteropListenerHeartbeatLibzmqPeer(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	const ivl, timeout = 100 * time.Millisecond, time.Second
	o := Options{HeartbeatInterval: ivl, HeartbeatTimeout: timeout}
	l, err := Listen(context.Background(), "127.0.0.1:0", zmq4.Sub, o, nil)
	require.NoError(t, err)
	defer l.Close()
	p := pytest.Start(t, pytest.Config{Connect: l.Endpoint()})
	defer p.Stop()
	c, err := l.Accept()
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.WriteMsg(append([]byte{1}, "kv@"...))) // subscribe
	errc := readMsgAsync(c)

	// 25 PINGs span more than two heartbeat timeouts; the connection is
	// still the same and delivers a message afterwards.
	deadline := time.After(30 * time.Second)
	for c.PingsSent() < 25 {
		select {
		case err := <-errc:
			t.Fatalf("libzmq peer dropped after %d PINGs: %v", c.PingsSent(), err)
		case <-deadline:
			t.Fatal("too few PINGs sent")
		case <-time.After(10 * time.Millisecond):
		}
	}
	delivered := false
	for !delivered { // publish until the subscription has reached libzmq
		_, _, err := p.Publish(1)
		require.NoError(t, err)
		select {
		case err := <-errc:
			require.NoError(t, err, "libzmq peer dropped")
			delivered = true
		case <-deadline:
			t.Fatal("nothing delivered")
		case <-time.After(50 * time.Millisecond):
		}
	}

	errc = readMsgAsync(c)
	require.NoError(t, p.Signal(syscall.SIGSTOP))
	defer func() { _ = p.Signal(syscall.SIGCONT) }()
	select {
	case err := <-errc:
		require.True(t, isGuardErr(err, ErrPeerDead), "got %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("a frozen libzmq peer was never dropped")
	}
	require.NoError(t, p.Signal(syscall.SIGCONT))
}
