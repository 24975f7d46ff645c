package zmqx

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/stretchr/testify/require"
)

// dialRaw opens a plain TCP connection (a mute client until it writes).
func dialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	return c
}

func TestListenSocketMuteClientDoesNotBlockPublishers(t *testing.T) {
	defer leakcheck.Check(t)()
	// Bind mode: kvroute's SUB binds, engines' PUBs connect. The mute
	// client's handshake deadline is far beyond the wait for the publisher's
	// message, so head-of-line blocking behind it fails the test however
	// fast or slow the machine is.
	s := NewSub(context.Background(), Options{HandshakeTimeout: time.Hour}, nil)
	require.NoError(t, s.SetOption(zmq4.OptionSubscribe, ""))
	require.NoError(t, ListenSocket(s, "127.0.0.1:0"))
	addr := s.Addr().String()

	mute := dialRaw(t, addr)
	defer mute.Close()

	pub := dialRaw(t, addr)
	defer pub.Close()
	require.NoError(t, handshakeAs(pub, "PUB", false))
	_, err := pub.Write(zmtpMessage([]byte("kv@p@m"), []byte{0, 0, 0, 0, 0, 0, 0, 3}, []byte("x")))
	require.NoError(t, err)
	m, err := recvTimeout(t, s, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, "kv@p@m", string(m.Frames[0]))
	require.NoError(t, CloseDrain(s))
}

func TestListenSocketHugeFrameFailsOnlyThatPeer(t *testing.T) {
	defer leakcheck.Check(t)()
	s := NewSub(context.Background(), Options{}, nil)
	require.NoError(t, s.SetOption(zmq4.OptionSubscribe, ""))
	require.NoError(t, ListenSocket(s, "127.0.0.1:0"))
	addr := s.Addr().String()

	bad := dialRaw(t, addr)
	defer bad.Close()
	require.NoError(t, handshakeAs(bad, "PUB", false))
	_, err := bad.Write(hugeFrameHeader(1 << 40))
	require.NoError(t, err)
	_, err = recvTimeout(t, s, 5*time.Second)
	require.True(t, isGuardErr(err, ErrFrameTooLarge), "got %v", err)

	// The listening socket keeps serving other engines.
	good := dialRaw(t, addr)
	defer good.Close()
	require.NoError(t, handshakeAs(good, "PUB", false))
	_, err = good.Write(zmtpMessage([]byte("kv@g@m"), []byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte("ok")))
	require.NoError(t, err)
	m, err := recvTimeout(t, s, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "ok", string(m.Frames[2]))
	require.NoError(t, CloseDrain(s))
}

// captureHandler records slog records for assertions.
type captureHandler struct {
	mu   sync.Mutex
	recs []string
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, b.String())
	h.mu.Unlock()
	return nil
}
func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *captureHandler) WithGroup(string) slog.Handler      { return h }
func (h *captureHandler) all() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.recs, "\n")
}

func TestGoZeromqLogsGoToSlog(t *testing.T) {
	defer leakcheck.Check(t)()
	h := &captureHandler{}
	s := NewSub(context.Background(), Options{}, slog.New(h))
	require.NoError(t, ListenSocket(s, "127.0.0.1:0"))
	// A peer offering the CURVE mechanism fails go-zeromq's handshake, which
	// go-zeromq logs (to stderr unless WithLogger is given).
	c := dialRaw(t, s.Addr().String())
	g := zmtpGreeting(false)
	copy(g[12:32], "CURVE\x00")
	_, err := c.Write(g)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return strings.Contains(h.all(), "could not open a ZMTP connection")
	}, 5*time.Second, 10*time.Millisecond)
	require.Contains(t, h.all(), "WARN")
	require.Contains(t, h.all(), "component=zmq4")
	_ = c.Close()
	require.NoError(t, CloseDrain(s))
}

func TestListenerHandshakesConcurrently(t *testing.T) {
	defer leakcheck.Check(t)()
	// The handshake deadline also bounds the healthy DEALER's handshake, so
	// it is long enough (2 s) for a loaded machine to complete one.
	l, err := Listen(context.Background(), "127.0.0.1:0", zmq4.Router, Options{HandshakeTimeout: 2 * time.Second}, nil)
	require.NoError(t, err)
	defer l.Close()

	mute := dialRaw(t, l.Addr().String())
	defer mute.Close()
	slow := dialRaw(t, l.Addr().String()) // sends one byte, then stalls
	defer slow.Close()
	_, err = slow.Write([]byte{0xff})
	require.NoError(t, err)

	d := NewDealer(context.Background(), Options{}, nil)
	defer func() { _ = CloseDrain(d) }()
	require.NoError(t, Dial(d, l.Endpoint()))
	c, err := l.Accept()
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, "DEALER", c.PeerType())

	payload := bytes.Repeat([]byte{1, 2, 3}, 1<<19)
	require.NoError(t, d.Send(zmq4.NewMsgFrom([]byte{}, []byte("req"), payload)))
	m, err := c.ReadMsg()
	require.NoError(t, err)
	require.False(t, m.Command)
	require.Equal(t, [][]byte{{}, []byte("req"), payload}, m.Frames)
	require.NoError(t, c.WriteMsg([]byte{}, []byte("rep"), payload, []byte{}))
	r, err := recvTimeout(t, d, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, [][]byte{{}, []byte("rep"), payload, {}}, r.Frames)

	// Both stalled clients time out and are counted.
	require.Eventually(t, func() bool { return l.HandshakeFailures() == 2 }, 20*time.Second, 10*time.Millisecond)
}

func TestListenerRejectsIncompatiblePeer(t *testing.T) {
	defer leakcheck.Check(t)()
	l, err := Listen(context.Background(), "127.0.0.1:0", zmq4.Router, Options{}, nil)
	require.NoError(t, err)
	defer l.Close()
	s := NewSub(context.Background(), Options{}, nil)
	require.Error(t, Dial(s, l.Endpoint()))
	require.NoError(t, CloseDrain(s))
	require.Eventually(t, func() bool { return l.HandshakeFailures() == 1 }, 5*time.Second, 10*time.Millisecond)
}

func TestConnAnswersPing(t *testing.T) {
	defer leakcheck.Check(t)()
	l, err := Listen(context.Background(), "127.0.0.1:0", zmq4.Router, Options{}, nil)
	require.NoError(t, err)
	defer l.Close()
	raw := dialRaw(t, l.Addr().String())
	defer raw.Close()
	require.NoError(t, handshakeAs(raw, "DEALER", false))
	c, err := l.Accept()
	require.NoError(t, err)
	defer c.Close()

	// PING: TTL 2 bytes, context "ctx1". libzmq peers send these when
	// heartbeats are enabled; go-zeromq's sockets never answer them.
	ping := append([]byte{4}, "PING"...)
	ping = append(ping, 0, 10)
	ping = append(ping, "ctx1"...)
	_, err = raw.Write(zmtpFrame(flagCommand, ping))
	require.NoError(t, err)
	_, err = raw.Write(zmtpMessage([]byte{}, []byte("after ping")))
	require.NoError(t, err)

	m, err := c.ReadMsg()
	require.NoError(t, err)
	require.Equal(t, "after ping", string(m.Frames[1]), "PING is not returned")
	fl, body, err := readFrame(raw)
	require.NoError(t, err)
	require.NotZero(t, fl&flagCommand)
	require.Equal(t, append([]byte{4}, "PONGctx1"...), body)

	// Other commands (ZMTP 3.1 SUBSCRIBE) are returned flagged.
	_, err = raw.Write(zmtpCommand("SUBSCRIBE", []byte("kv@")))
	require.NoError(t, err)
	m, err = c.ReadMsg()
	require.NoError(t, err)
	require.True(t, m.Command)
	name, body := commandName(m.Frames[0])
	require.Equal(t, "SUBSCRIBE", name)
	require.Equal(t, "kv@", string(body))

	// EOF mid-message is reported as unexpected.
	_, err = raw.Write([]byte{flagMore, 3, 'a'})
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	_, err = c.ReadMsg()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestListenerCloseAbortsPendingHandshakes(t *testing.T) {
	defer leakcheck.Check(t)()
	ctx, cancel := context.WithCancel(context.Background())
	l, err := Listen(ctx, "127.0.0.1:0", zmq4.Pub, Options{HandshakeTimeout: time.Minute}, nil)
	require.NoError(t, err)
	var conns []net.Conn
	for range 5 {
		c := dialRaw(t, l.Addr().String())
		_, _ = c.Write([]byte{0xff}) // started a greeting, never finishes
		conns = append(conns, c)
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		done <- err
	}()
	cancel() // the context ending closes the listener
	select {
	case err := <-done:
		require.ErrorIs(t, err, net.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Accept did not return after the context ended")
	}
	require.NoError(t, l.Close()) // idempotent
	for _, c := range conns {
		_ = c.Close()
	}
}

func TestCloseDrainLeavesNoReader(t *testing.T) {
	defer leakcheck.Check(t)()
	pub := startTestPub(t, Options{})
	defer pub.Close()
	s := NewSub(context.Background(), Options{}, nil)
	require.NoError(t, Dial(s, pub.Addr()))
	pub.waitSubscriber(t)
	// Fill go-zeromq's 10-slot channel and stop receiving: its reader then
	// blocks on a send that ignores the context, unless drained.
	for i := range 40 {
		pub.Send([]byte("kv"), []byte{0, 0, 0, 0, 0, 0, 0, byte(i)}, []byte("p"))
	}
	_, err := recvTimeout(t, s, 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, CloseDrain(s))
}

func TestRecvSkipsCommands(t *testing.T) {
	defer leakcheck.Check(t)()
	peer := startFakeServer(t, func(c net.Conn) {
		if handshakeAs(c, "PUB", true) != nil {
			return
		}
		ping := append([]byte{4}, "PING\x00\x0a"...)
		_, _ = c.Write(zmtpFrame(flagCommand, ping))
		_, _ = c.Write(zmtpFrame(flagCommand, ping))
		_, _ = c.Write(zmtpMessage([]byte("kv"), []byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte("x")))
		_, _ = io.Copy(io.Discard, c)
	})
	defer peer.Stop()
	s := NewSub(context.Background(), Options{}, nil)
	require.NoError(t, Dial(s, peer.Addr()))
	m, skipped, err := Recv(s)
	require.NoError(t, err)
	require.Equal(t, 2, skipped)
	require.Equal(t, "x", string(m.Frames[2]))
	require.NoError(t, CloseDrain(s))
}

// A go-zeromq socket listening through the guarded transport reports every
// connection it drops before go-zeromq sees it to Options.OnHandshakeFailure,
// as a Listener does, so that its owner's metric counts them.
func TestListenSocketReportsFailedHandshakes(t *testing.T) {
	defer leakcheck.Check(t)()
	failed := make(chan error, 1)
	s := NewSub(context.Background(), Options{HandshakeTimeout: time.Hour,
		OnHandshakeFailure: func(_ net.Addr, err error) { failed <- err }}, nil)
	require.NoError(t, ListenSocket(s, "127.0.0.1:0"))
	c := dialRaw(t, s.Addr().String())
	require.NoError(t, c.Close()) // gone before its first byte
	select {
	case err := <-failed:
		require.ErrorIs(t, err, io.EOF)
	case <-time.After(30 * time.Second):
		t.Fatal("the connection closed before its first byte was not reported")
	}
	require.NoError(t, CloseDrain(s))
}

// Bind mode: go-zeromq runs the handshakes of a listening socket one after
// the other in its accept loop, so a peer dripping its handshake a byte at a
// time held every engine connecting after it for as long as it dripped. Its
// handshake deadline (2 s here) frees the loop, and the next peer's
// handshake gets a whole deadline of its own from when go-zeromq starts it,
// however long it waited in line.
func TestListenSocketDrippingPeerDoesNotBlockEngines(t *testing.T) {
	defer leakcheck.Check(t)()
	s := NewSub(context.Background(), Options{HandshakeTimeout: 2 * time.Second}, nil)
	defer func() { require.NoError(t, CloseDrain(s)) }()
	require.NoError(t, s.SetOption(zmq4.OptionSubscribe, ""))
	require.NoError(t, ListenSocket(s, "127.0.0.1:0"))
	addr := s.Addr().String()

	dripper := dialRaw(t, addr)
	defer dripper.Close()
	stop := make(chan struct{})
	defer close(stop)
	hello := append(zmtpGreeting(false), zmtpCommand("READY",
		readyProps("Socket-Type", "PUB", "X-Pad", strings.Repeat("p", 300)))...)
	go drip(dripper, hello, 100*time.Millisecond, stop)
	// go-zeromq greets first: the dripper holds the accept loop from here.
	var g [64]byte
	_ = dripper.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.ReadFull(dripper, g[:])
	require.NoError(t, err)

	pub := dialRaw(t, addr)
	defer pub.Close()
	_ = pub.SetDeadline(time.Now().Add(20 * time.Second)) // the drip lasts 38 s
	_, err = pub.Write(zmtpGreeting(false))
	require.NoError(t, err)
	_, err = io.ReadFull(pub, g[:])
	require.NoError(t, err, "the engine's handshake waited behind the dripping peer")
	_, err = pub.Write(zmtpCommand("READY", readyProps("Socket-Type", "PUB")))
	require.NoError(t, err)
	_, _, err = readFrame(pub)
	require.NoError(t, err)
	_, err = pub.Write(zmtpMessage([]byte("kv@p@m"), []byte{0, 0, 0, 0, 0, 0, 0, 3}, []byte("x")))
	require.NoError(t, err)
	m, err := recvTimeout(t, s, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, "kv@p@m", string(m.Frames[0]))
}
