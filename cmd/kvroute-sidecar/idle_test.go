package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A keep-alive connection that made a request and then sends nothing is
// closed after --idle-timeout, on the client listener and on /metrics:
// before, both servers kept it for as long as the client did, so
// connections opened and left piled up until the process ran out of file
// descriptors.
func TestServeClosesIdleKeepAliveConnections(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	o, err := parseFlags([]string{"--host", "127.0.0.1", "--port", "0", "--metrics-port", "0",
		"--decoder", "http://127.0.0.1:1", "--idle-timeout", "300ms"})
	require.NoError(t, err)
	a, stop := startServe(t, o)
	defer stop()

	for _, addr := range a {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		require.False(t, resp.Close, "the server ended a keep-alive connection after one request")
		// Idle now: the server closes the connection after 300 ms. The
		// deadline only guards against a hang.
		require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
		_, err = br.ReadByte()
		require.ErrorIs(t, err, io.EOF, "the idle connection to %s was not closed by the server", addr)
		require.NoError(t, c.Close())
	}
}
