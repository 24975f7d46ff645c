package zmqx

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/stretchr/testify/require"
)

// echoPeer dials l as a DEALER and completes the handshake.
func echoPeer(t *testing.T, l *Listener) net.Conn {
	t.Helper()
	c := dialRaw(t, l.Addr().String())
	require.NoError(t, handshakeAs(c, "DEALER", false))
	return c
}

// TestServeLimitsConnectionsAndCloseEndsThem: each admitted connection is
// served in its own goroutine (an echo here); one beyond the limit is
// passed to reject and closed while the admitted ones keep being served;
// Close ends the serve functions blocked in their reads and leaves no
// goroutine behind.
func TestServeLimitsConnectionsAndCloseEndsThem(t *testing.T) {
	defer leakcheck.Check(t)()
	l, err := Listen(context.Background(), "127.0.0.1:0", zmq4.Router, Options{}, nil)
	require.NoError(t, err)
	var served, ended, rejected atomic.Int32
	s := Serve(l, 2, func(c *Conn) {
		served.Add(1)
		defer ended.Add(1)
		for {
			m, err := c.ReadMsg()
			if err != nil {
				return
			}
			if !m.Command && c.WriteMsg(m.Frames...) != nil {
				return
			}
		}
	}, func(*Conn) { rejected.Add(1) })

	echo := func(c net.Conn, text string) {
		t.Helper()
		_, err := c.Write(zmtpMessage([]byte(text)))
		require.NoError(t, err)
		_, body, err := readFrame(c)
		require.NoError(t, err)
		require.Equal(t, text, string(body))
	}
	a, b := echoPeer(t, l), echoPeer(t, l)
	defer a.Close()
	defer b.Close()
	echo(a, "a")
	echo(b, "b") // both admitted and served

	extra := echoPeer(t, l)
	defer extra.Close()
	_, _, err = readFrame(extra) // closed by the server without a reply
	require.ErrorIs(t, err, io.EOF)
	require.EqualValues(t, 1, rejected.Load())
	echo(a, "still served")

	// One admitted connection ends: its slot is free again.
	require.NoError(t, b.Close())
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) == 1
	}, 10*time.Second, time.Millisecond)
	c := echoPeer(t, l)
	defer c.Close()
	echo(c, "c")
	require.EqualValues(t, 1, rejected.Load())

	require.NoError(t, s.Close())
	require.EqualValues(t, served.Load(), ended.Load(), "Close returned before every serve function")
	require.EqualValues(t, 3, served.Load())
	_, _, err = readFrame(a)
	require.Error(t, err, "an open connection is closed by Close")
	require.NoError(t, s.Close(), "Close is idempotent")
}
