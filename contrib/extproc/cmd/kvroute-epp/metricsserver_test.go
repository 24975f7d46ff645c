package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// connWait bounds each wait for the server to close a connection: far
// beyond the timeouts under test; the close ends it.
const connWait = time.Minute

// serveMetrics serves a metrics server with the given limits on a loopback
// port until the test ends, and returns a connection to it.
func serveMetrics(t *testing.T, readHeader, idle time.Duration) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ms := metricsServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "kvroute_up 1\n")
	}), readHeader, idle)
	served := make(chan error, 1)
	go func() { served <- ms.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, ms.Close())
		require.ErrorIs(t, <-served, http.ErrServerClosed)
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(connWait))) // a bound on a broken test only
	return c
}

// requireClosedByServer waits for the server to close c: the next read
// ends with EOF, not with the test's own deadline.
func requireClosedByServer(t *testing.T, r io.Reader) {
	t.Helper()
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection open: %v", err)
}

// A scraper that leaves its keep-alive connection to the metrics port idle
// kept it, and a goroutine of the picker, for as long as it liked: the
// metrics server closes it after its idle timeout, as the gateway does.
func TestMetricsServerClosesIdleConnections(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	c := serveMetrics(t, time.Hour, 50*time.Millisecond)
	_, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: picker\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "kvroute_up 1\n", string(body))
	require.False(t, resp.Close, "the connection is kept alive after the response")
	// No next request: the connection idles until the server closes it.
	requireClosedByServer(t, br)
}

// A client that never finishes its request header is cut off after the
// header timeout.
func TestMetricsServerCutsUnfinishedHeaders(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	c := serveMetrics(t, 50*time.Millisecond, time.Hour)
	_, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: picker\r\n") // no blank line: the header never ends
	require.NoError(t, err)
	requireClosedByServer(t, c)
}
