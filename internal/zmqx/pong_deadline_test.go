package zmqx

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A client that keeps sending PINGs and reads nothing fills the kernel's
// buffers with PONGs until the Listener's next PONG cannot be written. With
// no WriteTimeout that PONG still has a deadline: ReadMsg fails with it and
// the connection is closed (the PONG may be half written), instead of
// ReadMsg, and the heartbeat waiting for the same write lock, blocking
// forever.
func TestListenerPongToClientThatStopsReadingHasADeadline(t *testing.T) {
	defer leakcheck.Check(t)()
	raw, c, closeAll := acceptSlowReader(t, Options{})
	defer closeAll()
	// The Listener's side sends with a small buffer too: with the kernel's
	// autotuned one (up to 4 MiB) the PONGs that fill it take tens of
	// seconds of 23-byte writes on a loaded machine under -race.
	tc, ok := c.g.Conn.(*net.TCPConn)
	require.True(t, ok, "the accepted connection is %T", c.g.Conn)
	require.NoError(t, tc.SetWriteBuffer(4<<10))
	errc := readMsgAsync(c)

	// PINGs with a 16-byte context, whose PONGs are 23 bytes each, until
	// the connection breaks: the Listener stops reading while its PONG
	// write is blocked, so this goroutine's writes block too until the
	// connection is closed.
	ping := zmtpCommand("PING", append([]byte{0, 0}, "0123456789abcdef"...))
	batch := bytes.Repeat(ping, 1024)
	wrote := make(chan error, 1)
	go func() {
		for {
			if _, err := raw.Write(batch); err != nil {
				wrote <- err
				return
			}
		}
	}()
	select {
	case err := <-errc:
		require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "got %v", err)
		require.False(t, IsIdle(err), "a write timeout is not an idle read")
	case <-time.After(30 * time.Second):
		t.Fatal("ReadMsg stayed blocked writing a PONG to a client that reads nothing")
	}
	select {
	case err := <-wrote:
		require.Error(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the connection was not closed after the PONG's deadline")
	}
}

// acceptSlowReader returns a Listener with o, a raw PUB peer connected to
// it whose socket reads through a 4 KiB buffer (so that writes to it
// block soon), and the Listener's Conn of that peer, with a func that
// closes all three (deferred before the caller's leak check returns).
func acceptSlowReader(t *testing.T, o Options) (raw net.Conn, c *Conn, closeAll func()) {
	t.Helper()
	l, err := Listen(context.Background(), "127.0.0.1:0", zmq4.Sub, o, nil)
	require.NoError(t, err)
	raw = dialRaw(t, l.Addr().String())
	require.NoError(t, raw.(*net.TCPConn).SetReadBuffer(4<<10))
	require.NoError(t, handshakeAs(raw, "PUB", false))
	c, err = l.Accept()
	require.NoError(t, err)
	return raw, c, func() { c.Close(); raw.Close(); l.Close() }
}
