package server

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A connection's read deadlines are not applied before its first byte (a
// client may dial ahead and send its first request much later, as it may
// to vLLM), and are from then on: the header timeout runs from the first
// byte.
func TestFirstByteConnStartsTheHeaderTimeoutAtTheFirstByte(t *testing.T) {
	defer leakcheck.Check(t)()
	client, srv := net.Pipe()
	defer client.Close()
	c := &firstByteConn{Conn: srv, timeout: time.Hour}
	defer c.Close()

	// The server's header deadline, set at the accept: already passed.
	require.NoError(t, c.SetReadDeadline(time.Unix(1, 0)))
	wrote := make(chan error, 1)
	go func() {
		_, err := client.Write([]byte("POST /v1/completions HTTP/1.1\r\n"))
		wrote <- err
	}()
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	require.NoError(t, err, "a deadline set before the first byte does not time the connection out")
	require.Equal(t, "POST /v1/completions HTTP/1.1\r\n", string(buf[:n]))
	require.NoError(t, <-wrote)

	// From the first byte on, the server's deadlines apply.
	require.NoError(t, c.SetReadDeadline(time.Unix(1, 0)))
	_, err = c.Read(buf)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
}
