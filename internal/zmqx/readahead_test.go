package zmqx

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A flooding peer's messages: floodMsgs frames of floodSize bytes, each
// starting with its 8-byte number, and a PING (context "p" and its number)
// after every floodEvery of them. 16 MiB: more than the kernel's buffers
// on both sides and the read-ahead the tests allow hold together, so a
// connection that stopped reading leaves the peer's later PINGs unread.
const (
	floodMsgs  = 256
	floodEvery = 16
	floodSize  = 64 << 10
	floodPings = floodMsgs / floodEvery
)

// floodPeer plays a heartbeating publisher on c after its handshake:
// it writes the flood and reports, on pongs, the context of every PONG
// it reads back, until c is closed.
func floodPeer(c net.Conn, pongs chan<- string) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			fl, body, err := readFrame(c)
			if err != nil {
				return
			}
			if name, ctx := commandName(body); fl&flagCommand != 0 && name == "PONG" {
				pongs <- string(ctx)
			}
		}
	}()
	msg := make([]byte, floodSize)
	for i := range floodMsgs {
		binary.BigEndian.PutUint64(msg, uint64(i))
		if _, err := c.Write(zmtpMessage(msg)); err != nil {
			return
		}
		if (i+1)%floodEvery == 0 {
			ping := append([]byte{4}, "PING"...)
			ping = append(ping, 0, 100) // TTL 10 s
			ping = fmt.Appendf(ping, "p%d", i/floodEvery)
			if _, err := c.Write(zmtpFrame(flagCommand, ping)); err != nil {
				return
			}
		}
	}
}

// awaitPongs fails the test unless every PING of the flood is answered, in
// order, while the connection's owner reads nothing.
func awaitPongs(t *testing.T, pongs <-chan string) {
	t.Helper()
	for k := range floodPings {
		select {
		case got := <-pongs:
			require.Equal(t, fmt.Sprintf("p%d", k), got)
		case <-time.After(10 * time.Second): // the peer's TTL: it would have dropped the connection
			t.Fatalf("PING %d of %d was not answered while the owner was not reading", k+1, floodPings)
		}
	}
}

// requireFloodAccounted reads, with next, the flood's messages the
// connection kept, and requires them in order and, with the ones it
// dropped, the whole flood: each message is delivered or counted.
func requireFloodAccounted(t *testing.T, dropped uint64, next func() ([]byte, error)) {
	t.Helper()
	require.NotZero(t, dropped, "16 MiB do not fit 1 MiB of read-ahead")
	last := -1
	for range floodMsgs - int(dropped) {
		f, err := next()
		require.NoError(t, err)
		require.Len(t, f, floodSize)
		i := int(binary.BigEndian.Uint64(f))
		require.Greater(t, i, last, "in order")
		last = i
	}
}

// A SUB whose owner stops calling Recv still answers its publisher's
// PINGs, however much the publisher sends meanwhile: the messages beyond
// its read-ahead are dropped and counted, the others delivered in order
// when the owner reads again.
func TestSubAnswersPingsWhileOwnerIsNotReading(t *testing.T) {
	defer leakcheck.Check(t)()
	pongs := make(chan string, floodPings)
	srv := startFakeServer(t, func(c net.Conn) {
		if handshakeAs(c, "PUB", true) == nil {
			floodPeer(c, pongs)
			var b [1]byte
			_, _ = c.Read(b[:]) // until closed
		}
	})
	defer srv.Stop()
	var dropped atomic.Uint64
	before := MessagesDropped()
	o := Options{ReadAheadBytes: 1 << 20, OnDrop: func() { dropped.Add(1) }}
	s := NewSub(context.Background(), o, nil)
	defer CloseDrain(s)
	require.NoError(t, Dial(s, srv.Addr()))

	awaitPongs(t, pongs) // the last PING follows the last message: all are read
	require.Equal(t, dropped.Load(), MessagesDropped()-before)
	requireFloodAccounted(t, dropped.Load(), func() ([]byte, error) {
		m, err := recvTimeout(t, s, 10*time.Second)
		if err != nil {
			return nil, err
		}
		require.Len(t, m.Frames, 1)
		return m.Frames[0], nil
	})
}

// A Listener's connection whose owner pauses ReadMsg still answers its
// client's PINGs, however much the client sends meanwhile, and accounts
// for every message as a SUB does.
func TestConnAnswersPingsWhileOwnerIsNotReading(t *testing.T) {
	defer leakcheck.Check(t)()
	var dropped atomic.Uint64
	o := Options{ReadAheadBytes: 1 << 20, OnDrop: func() { dropped.Add(1) }}
	l, err := Listen(context.Background(), "127.0.0.1:0", zmq4.Sub, o, nil)
	require.NoError(t, err)
	defer l.Close()
	raw := dialRaw(t, l.Addr().String())
	defer raw.Close()
	require.NoError(t, handshakeAs(raw, "PUB", false))
	c, err := l.Accept()
	require.NoError(t, err)
	defer c.Close()
	pongs := make(chan string, floodPings)
	done := make(chan struct{})
	go func() {
		defer close(done)
		floodPeer(raw, pongs)
	}()
	defer func() { <-done }()
	defer raw.Close()

	awaitPongs(t, pongs)
	requireFloodAccounted(t, dropped.Load(), func() ([]byte, error) {
		select {
		case r := <-readMsgFramesAsync(c):
			if r.err != nil {
				return nil, r.err
			}
			require.Len(t, r.m.Frames, 1)
			return r.m.Frames[0], nil
		case <-time.After(10 * time.Second):
			return nil, errors.New("test: ReadMsg did not return in time")
		}
	})
}

type readResult struct {
	m   Message
	err error
}

// readMsgFramesAsync runs c.ReadMsg on its own goroutine.
func readMsgFramesAsync(c *Conn) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		m, err := c.ReadMsg()
		ch <- readResult{m, err}
	}()
	return ch
}
