package zmqx

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/stretchr/testify/require"
)

func TestDialMutePeerFailsWithinHandshakeDeadline(t *testing.T) {
	defer leakcheck.Check(t)()
	// A mute peer accepts TCP and never sends the ZMTP greeting (also what a
	// SIGSTOPped engine looks like). Bare go-zeromq hangs in Dial forever.
	mute := startFakeServer(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	defer mute.Stop()

	for _, tc := range []struct {
		name string
		hs   time.Duration
		want time.Duration
	}{
		{"configured 200ms", 200 * time.Millisecond, 200 * time.Millisecond},
		{"default 1s", 0, DefaultHandshakeTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mk := range []func(context.Context, Options) zmq4.Socket{
				func(ctx context.Context, o Options) zmq4.Socket { return NewSub(ctx, o, nil) },
				func(ctx context.Context, o Options) zmq4.Socket { return NewDealer(ctx, o, nil) },
			} {
				var armed deadlineLog
				ctx := context.WithValue(context.Background(), dialHookKey{}, func(c net.Conn, err error) (net.Conn, error) {
					if err != nil {
						return nil, err
					}
					return &deadlineConn{Conn: c, log: &armed}, nil
				})
				s := mk(ctx, Options{HandshakeTimeout: tc.hs})
				start := time.Now()
				err := Dial(s, mute.Addr())
				elapsed := time.Since(start)
				require.Error(t, err)
				require.ErrorIs(t, err, os.ErrDeadlineExceeded, "want the socket's read deadline, got %v", err)
				// The read deadline cannot fire early, and the one armed was
				// at most want ahead of when it was armed: the handshake
				// waited exactly its timeout, however loaded the machine.
				require.GreaterOrEqual(t, elapsed, tc.want-10*time.Millisecond)
				ahead := armed.read()
				require.NotEmpty(t, ahead, "the handshake read armed a deadline")
				for _, d := range ahead {
					require.LessOrEqual(t, d, tc.want)
				}
				require.NoError(t, CloseDrain(s))
			}
		})
	}
}

func TestDialRefusedFailsAtOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	addr := testport.Addr(t) // nothing listens, nor takes the port meanwhile

	// go-zeromq retries a failed dial (10 times, 250 ms apart, by default);
	// kvroute's sockets make exactly one attempt and leave backoff to the
	// caller. Counting the transport's attempts shows it without timing.
	for _, mk := range []func(context.Context, Options) zmq4.Socket{
		func(ctx context.Context, o Options) zmq4.Socket { return NewSub(ctx, o, nil) },
		func(ctx context.Context, o Options) zmq4.Socket { return NewDealer(ctx, o, nil) },
	} {
		var attempts atomic.Int64
		ctx := context.WithValue(context.Background(), dialHookKey{}, func(c net.Conn, err error) (net.Conn, error) {
			attempts.Add(1)
			return c, err
		})
		s := mk(ctx, Options{})
		err := Dial(s, addr)
		require.ErrorIs(t, err, syscall.ECONNREFUSED)
		require.EqualValues(t, 1, attempts.Load(), "a refused dial is not retried")
		require.NoError(t, CloseDrain(s))
	}
}

func TestHugeFrameFailsOnlyThatConnection(t *testing.T) {
	defer leakcheck.Check(t)()
	good := startTestPub(t, Options{})
	defer good.Close()
	goodSub := NewSub(context.Background(), Options{}, nil)
	require.NoError(t, goodSub.SetOption(zmq4.OptionSubscribe, ""))
	require.NoError(t, Dial(goodSub, good.Addr()))
	good.waitSubscriber(t)
	defer func() { _ = CloseDrain(goodSub) }()

	for _, size := range []uint64{1 << 40, 1 << 50, 1<<63 + 5, DefaultMaxFrameSize + 1} {
		// The hostile peer completes the handshake, then announces the frame
		// and sends nothing more.
		hostile := startFakeServer(t, func(c net.Conn) {
			if handshakeAs(c, "PUB", true) != nil {
				return
			}
			_, _ = c.Write(hugeFrameHeader(size))
			_, _ = io.Copy(io.Discard, c)
		})
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)

		s := NewSub(context.Background(), Options{}, nil)
		require.NoError(t, s.SetOption(zmq4.OptionSubscribe, ""))
		require.NoError(t, Dial(s, hostile.Addr()))
		_, err := recvTimeout(t, s, 5*time.Second)
		require.True(t, isGuardErr(err, ErrFrameTooLarge), "size %d: got %v", size, err)
		var ge *GuardError
		require.ErrorAs(t, err, &ge)
		require.Equal(t, size, ge.Size)
		require.EqualValues(t, DefaultMaxFrameSize, ge.Limit)

		runtime.ReadMemStats(&after)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(32<<20), "no big allocation")
		require.NoError(t, CloseDrain(s))
		hostile.Stop()

		// The other publisher's subscriber is unaffected.
		require.Equal(t, 1, good.Send([]byte("kv@a@m"), []byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte("payload")))
		m, err := recvTimeout(t, goodSub, 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, "payload", string(m.Frames[2]))
	}
}

func TestMessageOfManyFramesIsBounded(t *testing.T) {
	defer leakcheck.Check(t)()
	// One message of endless empty frames costs frameOverhead each against
	// MaxMessageSize, so it fails instead of growing go-zeromq's frame slice.
	hostile := startFakeServer(t, func(c net.Conn) {
		if handshakeAs(c, "PUB", true) != nil {
			return
		}
		chunk := bytes.Repeat([]byte{flagMore, 0}, 4096)
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	defer hostile.Stop()
	s := NewSub(context.Background(), Options{MaxFrameSize: 1 << 20}, nil)
	require.NoError(t, Dial(s, hostile.Addr()))
	_, err := recvTimeout(t, s, 5*time.Second)
	require.True(t, isGuardErr(err, ErrMessageTooLarge), "got %v", err)
	require.NoError(t, CloseDrain(s))
}

// MaxMessageSize given alone bounds every message, its single frame
// included: the default frame limit, larger, does not raise it.
func TestMaxMessageSizeAloneBoundsAOneFrameMessage(t *testing.T) {
	defer leakcheck.Check(t)()
	const limit = 1 << 20
	hostile := startFakeServer(t, func(c net.Conn) {
		if handshakeAs(c, "PUB", true) != nil {
			return
		}
		_, _ = c.Write(zmtpFrame(0, make([]byte, 2*limit)))
		_, _ = io.Copy(io.Discard, c)
	})
	defer hostile.Stop()
	s := NewSub(context.Background(), Options{MaxMessageSize: limit}, nil)
	require.NoError(t, Dial(s, hostile.Addr()))
	_, err := recvTimeout(t, s, 5*time.Second)
	require.True(t, isGuardErr(err, ErrFrameTooLarge) || isGuardErr(err, ErrMessageTooLarge), "got %v", err)
	var ge *GuardError
	require.ErrorAs(t, err, &ge)
	require.EqualValues(t, limit, ge.Limit)
	require.NoError(t, CloseDrain(s))
}

func TestFramesSplitAcrossReadsArriveIntact(t *testing.T) {
	defer leakcheck.Check(t)()
	payload := make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	msg := zmtpMessage([]byte("kv@10.0.0.1:8000@m"), []byte{0, 0, 0, 0, 0, 0, 0, 5}, payload)
	msg = append(msg, zmtpMessage([]byte("t"), []byte{}, bytes.Repeat([]byte{9}, 300))...)
	// The peer writes the messages in small random pieces, so header bytes and
	// bodies straddle the reads on the other side.
	peer := startFakeServer(t, func(c net.Conn) {
		if handshakeAs(c, "PUB", true) != nil {
			return
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		r := rand.New(rand.NewPCG(1, 2))
		for b := msg; len(b) > 0; {
			n := min(1+r.IntN(13), len(b))
			if r.IntN(8) == 0 {
				n = min(4096+r.IntN(65536), len(b))
			}
			if _, err := c.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
		}
		_, _ = io.Copy(io.Discard, c)
	})
	defer peer.Stop()
	s := NewSub(context.Background(), Options{}, nil)
	require.NoError(t, Dial(s, peer.Addr()))
	m, err := recvTimeout(t, s, 10*time.Second)
	require.NoError(t, err)
	require.Len(t, m.Frames, 3)
	require.Equal(t, "kv@10.0.0.1:8000@m", string(m.Frames[0]))
	require.True(t, bytes.Equal(payload, m.Frames[2]))
	m, err = recvTimeout(t, s, 10*time.Second)
	require.NoError(t, err)
	require.Len(t, m.Frames, 3)
	require.Len(t, m.Frames[2], 300)
	require.NoError(t, CloseDrain(s))
}

func TestOneMiBFramesPass(t *testing.T) {
	defer leakcheck.Check(t)()
	pub := startTestPub(t, Options{})
	defer pub.Close()
	s := NewSub(context.Background(), Options{IdleTimeout: 5 * time.Second}, nil)
	require.NoError(t, s.SetOption(zmq4.OptionSubscribe, "kv@"))
	require.NoError(t, Dial(s, pub.Addr()))
	pub.waitSubscriber(t)
	payload := bytes.Repeat([]byte{0xab}, 1<<20)
	for i := range 8 {
		seq := []byte{0, 0, 0, 0, 0, 0, 0, byte(i)}
		require.Equal(t, 1, pub.Send([]byte("kv@x@m"), seq, payload))
		m, err := recvTimeout(t, s, 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, byte(i), m.Frames[1][7])
		require.True(t, bytes.Equal(payload, m.Frames[2]))
	}
	require.NoError(t, CloseDrain(s))
}

func TestIdleDeadlineFires(t *testing.T) {
	defer leakcheck.Check(t)()
	pub := startTestPub(t, Options{})
	defer pub.Close()
	// The deadline is re-armed by every read, so traffic every 50 ms keeps
	// the connection alive; 2 s of margin, because on a loaded machine the
	// reader can be descheduled for a few hundred milliseconds (a 300 ms
	// deadline fired during the traffic phase with two suites running).
	const idle = 2 * time.Second
	s := NewSub(context.Background(), Options{IdleTimeout: idle}, nil)
	defer func() { _ = CloseDrain(s) }()
	require.NoError(t, Dial(s, pub.Addr()))
	pub.waitSubscriber(t)

	// Traffic every 50 ms keeps the connection alive well past the deadline.
	for i := range 12 {
		require.Equal(t, 1, pub.Send([]byte("kv"), []byte{0, 0, 0, 0, 0, 0, 0, byte(i)}, []byte("p")))
		_, err := recvTimeout(t, s, 5*time.Second)
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond) // pacing the publisher, not synchronisation
	}
	// Then silence: the read deadline fails the connection.
	start := time.Now()
	_, err := recvTimeout(t, s, 5*time.Second)
	elapsed := time.Since(start)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.GreaterOrEqual(t, elapsed, idle/2, "not before the deadline")
}

func TestBadReadyFailsDialWithoutPanic(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, tc := range []struct {
		name  string
		ready []byte
	}{
		{"unknown socket type", zmtpCommand("READY", readyProps("Socket-Type", "FOO"))},
		{"lower-case socket type", zmtpCommand("READY", readyProps("Socket-Type", "pub"))},
		{"missing socket type", zmtpCommand("READY", readyProps("Identity", "x"))},
		{"upper-case key", zmtpCommand("READY", readyProps("SOCKET-TYPE", "PUB"))},
		{"truncated property", zmtpCommand("READY", []byte{200, 'a', 'b'})},
		{"value past the end", zmtpCommand("READY", append(readyProps("Socket-Type", "PUB"), 1, 'k', 0, 0, 0, 9, 'v'))},
		{"non-ascii key", zmtpCommand("READY", append(readyProps("Socket-Type", "PUB"), readyProps("\u017focket-type", "FOO")...))},
		{"huge command", zmtpCommand("READY", make([]byte, maxHandshakeCommand+1))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer := startFakeServer(t, func(c net.Conn) {
				_, _ = c.Write(zmtpGreeting(true))
				_, _ = c.Write(tc.ready)
				_, _ = io.Copy(io.Discard, c)
			})
			defer peer.Stop()
			s := NewSub(context.Background(), Options{}, nil)
			err := Dial(s, peer.Addr())
			require.True(t, isGuardErr(err, ErrBadHandshake), "got %v", err)
			require.NoError(t, CloseDrain(s))
		})
	}
}

func TestReadyVariantsGoZeromqAccepts(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, key := range []string{"Socket-Type", "socket-type", "socket-Type"} {
		peer := startFakeServer(t, func(c net.Conn) {
			_, _ = c.Write(zmtpGreeting(true))
			_, _ = c.Write(zmtpCommand("READY", readyProps("Identity", "", key, "PUB")))
			_, _ = io.Copy(io.Discard, c)
		})
		s := NewSub(context.Background(), Options{}, nil)
		require.NoError(t, Dial(s, peer.Addr()), key)
		require.NoError(t, CloseDrain(s))
		peer.Stop()
	}
}

// drip writes b to c one byte every gap, and stops at the first failed write
// (the other side closed the connection) or when stop is closed.
func drip(c net.Conn, b []byte, gap time.Duration, stop <-chan struct{}) {
	for i := range b {
		if _, err := c.Write(b[i : i+1]); err != nil {
			return
		}
		select {
		case <-stop:
			return
		case <-time.After(gap):
		}
	}
}

func TestDrippingPeerCannotExtendHandshake(t *testing.T) {
	defer leakcheck.Check(t)()
	// A peer that sends its greeting and READY a byte at a time, each
	// within the handshake timeout of the one before, must not keep the
	// handshake going for as long as it likes: dialing it would hang the
	// subscriber's Dial, and dripping into a Listener would hold one of its
	// handshake slots, for the bytes times the gap (a 64 KiB READY at
	// 0.9 s a byte is 16 hours). The handshake (300 ms here) cannot be done
	// in the 7 bytes that arrive within it.
	const hs = 300 * time.Millisecond
	const gap = 40 * time.Millisecond
	hello := func(server bool, typ string) []byte {
		return append(zmtpGreeting(server), zmtpCommand("READY", readyProps("Socket-Type", typ))...)
	}

	t.Run("dial", func(t *testing.T) {
		stop := make(chan struct{})
		peer := startFakeServer(t, func(c net.Conn) {
			go func() { _, _ = io.Copy(io.Discard, c) }()
			drip(c, hello(true, "PUB"), gap, stop)
		})
		defer peer.Stop()
		defer close(stop)
		s := NewSub(context.Background(), Options{HandshakeTimeout: hs}, nil)
		defer func() { require.NoError(t, CloseDrain(s)) }()
		err := Dial(s, peer.Addr())
		require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the dripped handshake must fail, got %v", err)
	})

	t.Run("listen", func(t *testing.T) {
		l, err := Listen(context.Background(), "127.0.0.1:0", zmq4.Router, Options{HandshakeTimeout: hs}, nil)
		require.NoError(t, err)
		defer l.Close()
		c := dialRaw(t, l.Addr().String())
		defer c.Close()
		go func() { _, _ = io.Copy(io.Discard, c) }()
		stop := make(chan struct{})
		defer close(stop)
		go drip(c, hello(false, "DEALER"), gap, stop)
		require.Eventually(t, func() bool { return l.HandshakeFailures() == 1 }, 20*time.Second, 10*time.Millisecond)
	})
}
