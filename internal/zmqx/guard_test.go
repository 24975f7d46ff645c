package zmqx

import (
	"context"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// scanStream feeds stream to a fresh guard scanner in pieces of the given
// sizes (cycled) and returns the first error and the scanner.
func scanStream(stream []byte, o Options, pieces []int) (*guardConn, error) {
	g := &guardConn{o: o.withDefaults(), greeting: greetingLen, Conn: nopConn{}}
	for i := 0; len(stream) > 0; i++ {
		n := min(pieces[i%len(pieces)], len(stream))
		if err := g.scan(stream[:n]); err != nil {
			return g, err
		}
		stream = stream[n:]
	}
	return g, nil
}

type nopConn struct{ net.Conn }

func (nopConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

func validStream() []byte {
	s := zmtpGreeting(true)
	s = append(s, zmtpCommand("READY", readyProps("Socket-Type", "PUB", "Identity", ""))...)
	s = append(s, zmtpMessage([]byte("kv@a@m"), make([]byte, 8), make([]byte, 300))...)
	s = append(s, zmtpMessage([]byte{}, []byte{})...)
	s = append(s, zmtpMessage(make([]byte, 255), make([]byte, 256), make([]byte, 70000))...)
	return s
}

func TestScanAnySplit(t *testing.T) {
	stream := validStream()
	r := rand.New(rand.NewPCG(3, 4))
	splits := [][]int{{1}, {2}, {3}, {7}, {9}, {64}, {65}, {len(stream)}}
	for range 50 {
		p := make([]int, 20)
		for i := range p {
			p[i] = 1 + r.IntN(400)
		}
		splits = append(splits, p)
	}
	for _, p := range splits {
		g, err := scanStream(stream, Options{}, p)
		require.NoError(t, err, "pieces %v", p)
		require.True(t, g.handshook)
		require.Zero(t, g.hdrLen)
		require.Zero(t, g.body)
		require.Zero(t, g.msgSize, "message accounting resets after the last frame")
	}
}

func TestScanOversizedHeaderSplitByteByByte(t *testing.T) {
	stream := zmtpGreeting(true)
	stream = append(stream, zmtpCommand("READY", readyProps("Socket-Type", "PUB"))...)
	ok := len(stream)
	stream = append(stream, hugeFrameHeader(1<<40)...)
	g := &guardConn{o: Options{}.withDefaults(), greeting: greetingLen, Conn: nopConn{}}
	require.NoError(t, g.scan(stream[:ok]))
	for i := ok; i < len(stream)-1; i++ {
		require.NoError(t, g.scan(stream[i:i+1]), "byte %d of the header", i-ok)
	}
	err := g.scan(stream[len(stream)-1:])
	require.True(t, isGuardErr(err, ErrFrameTooLarge), "got %v", err)
}

func TestScanLimits(t *testing.T) {
	o := Options{MaxFrameSize: 1000, MaxMessageSize: 1500}
	base := zmtpGreeting(true)
	base = append(base, zmtpCommand("READY", readyProps("Socket-Type", "PUB"))...)

	_, err := scanStream(append(append([]byte{}, base...), zmtpMessage(make([]byte, 1000))...), o, []int{5})
	require.NoError(t, err, "a frame at the limit passes")
	_, err = scanStream(append(append([]byte{}, base...), zmtpMessage(make([]byte, 1001))...), o, []int{5})
	require.ErrorIs(t, err, ErrFrameTooLarge)
	_, err = scanStream(append(append([]byte{}, base...), zmtpMessage(make([]byte, 900), make([]byte, 900))...), o, []int{5})
	require.ErrorIs(t, err, ErrMessageTooLarge)
	// Two separate messages of 900 bytes are fine: the budget is per message.
	two := append(append([]byte{}, base...), zmtpMessage(make([]byte, 900))...)
	two = append(two, zmtpMessage(make([]byte, 900))...)
	_, err = scanStream(two, o, []int{5})
	require.NoError(t, err)
}

func TestReadAfterGuardErrorIsSticky(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	g := newGuardConn(context.Background(), a, Options{}.withDefaults(), nil)
	stream := zmtpGreeting(true)
	stream = append(stream, zmtpCommand("READY", readyProps("Socket-Type", "NOPE"))...)
	go func() { _, _ = b.Write(stream) }()
	buf := make([]byte, 256)
	var err error
	for err == nil {
		var n int
		n, err = g.Read(buf)
		if err != nil {
			require.Zero(t, n)
		}
	}
	require.ErrorIs(t, err, ErrBadHandshake)
	_, err2 := g.Read(buf)
	require.ErrorIs(t, err2, ErrBadHandshake)
}

func TestHandshakeTimeoutClosesConn(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	// The handshake's deadline, not the idle one, bounds the read: the one
	// armed lies at most 100 ms ahead, and the read ends on it.
	var armed deadlineLog
	g := newGuardConn(context.Background(), &deadlineConn{Conn: a, log: &armed},
		Options{HandshakeTimeout: 100 * time.Millisecond, IdleTimeout: time.Hour}.withDefaults(), nil)
	_, err := g.Read(make([]byte, 64))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	ahead := armed.read()
	require.Len(t, ahead, 1)
	require.LessOrEqual(t, ahead[0], 100*time.Millisecond)
	// A handshake failure closes the connection: go-zeromq would not.
	_, err = b.Write([]byte{1})
	require.Error(t, err)
}

func TestEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1:5556":        "tcpx://10.0.0.1:5556",
		"tcp://10.0.0.1:5556":  "tcpx://10.0.0.1:5556",
		"tcpx://10.0.0.1:5556": "tcpx://10.0.0.1:5556",
		"tcp://[fd00::1]:5557": "tcpx://[fd00::1]:5557",
		"tcp://pod.example:1":  "tcpx://pod.example:1",
		"tcp://127.0.0.1:0":    "tcpx://127.0.0.1:0",
	} {
		got, err := Endpoint(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got)
	}
	for _, in := range []string{"ipc:///tmp/x", "inproc://a", "10.0.0.1", "tcp://", "udp://1.2.3.4:5",
		"tcp://10.0.0.1:65536", "tcp://10.0.0.1:-1", "tcp://10.0.0.1:http", "tcp://10.0.0.1:"} {
		_, err := Endpoint(in)
		require.Error(t, err, in)
	}
}

func TestOptions(t *testing.T) {
	d := Options{}.withDefaults()
	require.Equal(t, DefaultHandshakeTimeout, d.HandshakeTimeout)
	require.Equal(t, DefaultDialTimeout, d.DialTimeout)
	require.EqualValues(t, DefaultMaxFrameSize, d.MaxFrameSize)
	require.EqualValues(t, DefaultMaxFrameSize+1<<20, d.MaxMessageSize)
	require.Zero(t, d.IdleTimeout)
	require.Zero(t, Options{HandshakeTimeout: -1}.withDefaults().HandshakeTimeout, "negative disables")

	require.NoError(t, Options{}.Validate())
	require.Error(t, Options{IdleTimeout: -1}.Validate())
	require.Error(t, Options{WriteTimeout: -1}.Validate())
	require.Error(t, Options{MaxFrameSize: -1}.Validate())
	require.Error(t, Options{MaxFrameSize: 10, MaxMessageSize: 5}.Validate())

	ctx := WithOptions(context.Background(), Options{IdleTimeout: time.Minute})
	require.Equal(t, time.Minute, OptionsFrom(ctx).IdleTimeout)
	require.Equal(t, DefaultHandshakeTimeout, OptionsFrom(ctx).HandshakeTimeout)
	require.Equal(t, d, OptionsFrom(context.Background()))

	_, err := Listen(context.Background(), "127.0.0.1:0", zmq4.SocketType("NOPE"), Options{}, nil)
	require.Error(t, err)
	_, err = Listen(context.Background(), "127.0.0.1:0", zmq4.Pub, Options{IdleTimeout: -1}, nil)
	require.Error(t, err)
}

// A socket connection whose context has already ended is closed at once on
// another goroutine; that Close must see and stop the heartbeat (it used to
// be set after the close hook was registered: a data race, and a heartbeat
// goroutine left running when Close came first).
func TestSocketConnOnAnEndedContextStopsItsHeartbeat(t *testing.T) {
	defer leakcheck.Check(t)()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 50 {
		a, b := net.Pipe()
		g := newSocketConn(ctx, a, Options{HeartbeatInterval: time.Hour, HeartbeatTimeout: time.Hour}.withDefaults(), nil)
		select {
		case <-g.hb.exited:
		case <-time.After(10 * time.Second):
			t.Fatal("the heartbeat goroutine outlived the connection")
		}
		_, err := b.Write([]byte{1})
		require.Error(t, err, "the connection is closed")
		b.Close()
	}
}
