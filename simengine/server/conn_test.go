package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
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

// A keep-alive connection idle after a request is closed after vLLM's
// keep-alive timeout (VLLM_HTTP_TIMEOUT_KEEP_ALIVE, 5 s by default), which
// uvicorn runs from the end of the response: a client that keeps idle
// connections longer meets the close it meets on vLLM. Before, the server
// never closed an idle connection. The timeout is lowered here so the
// close is awaited, not slept for.
func TestIdleKeepAliveConnectionClosedAfterVLLMTimeout(t *testing.T) {
	defer leakcheck.Check(t)()
	s, err := New(Config{Model: "m", Engine: fastEngine()}, Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	require.Equal(t, 5*time.Second, s.srv.IdleTimeout, "vLLM's VLLM_HTTP_TIMEOUT_KEEP_ALIVE default")
	s.srv.IdleTimeout = 50 * time.Millisecond
	require.NoError(t, s.Start("127.0.0.1:0"))

	c, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, resp.Body.Close())

	// The server closes the idle connection: the read ends with EOF long
	// before this deadline, which only keeps a broken server from hanging
	// the test.
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
}

// The server closes a connection idle past Config.KeepAliveTimeout, vLLM's
// 5 s when zero; a negative one is refused naming its key.
func TestKeepAliveTimeoutIsConfigured(t *testing.T) {
	s, err := New(Config{Model: "m"}, Options{})
	require.NoError(t, err)
	require.Equal(t, DefaultKeepAliveTimeout, s.srv.IdleTimeout)
	require.NoError(t, s.Close())
	s, err = New(Config{Model: "m", KeepAliveTimeout: time.Hour}, Options{})
	require.NoError(t, err)
	require.Equal(t, time.Hour, s.srv.IdleTimeout)
	require.NoError(t, s.Close())
	_, err = New(Config{Model: "m", KeepAliveTimeout: -time.Second}, Options{})
	require.ErrorContains(t, err, "keepAliveTimeout")
}
