package zmqx

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A handshake the listener's own Close aborts is no failure of the peer's:
// it is neither counted nor reported to OnHandshakeFailure, so a shutdown
// with connections half-open adds nothing to the failed-handshake metric
// its owner exports. A handshake that fails on its own still is.
func TestCloseAbortsHandshakesUncounted(t *testing.T) {
	defer leakcheck.Check(t)()
	failed := make(chan error, 4)
	l, err := Listen(context.Background(), "127.0.0.1:0", zmq4.Router, Options{HandshakeTimeout: time.Hour,
		OnHandshakeFailure: func(_ net.Addr, err error) { failed <- err }}, nil)
	require.NoError(t, err)

	gone := dialRaw(t, l.Endpoint()[len("tcp://"):])
	require.NoError(t, gone.Close()) // a peer's own failure
	select {
	case err := <-failed:
		require.ErrorIs(t, err, io.EOF)
	case <-time.After(30 * time.Second): // a hang guard only
		t.Fatal("a peer gone mid-handshake was not reported")
	}

	c := dialRaw(t, l.Endpoint()[len("tcp://"):])
	defer c.Close()
	_, err = c.Write(zmtpGreeting(false)[:10]) // the start of a greeting: the handshake waits for the rest
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the listener has c in its handshake
		l.acc.mu.Lock()
		defer l.acc.mu.Unlock()
		return l.acc.preparing == 1
	}, 30*time.Second, time.Millisecond)
	require.NoError(t, l.Close()) // aborts that handshake and waits for it
	require.Empty(t, failed, "the listener's own Close is no handshake failure")
}
