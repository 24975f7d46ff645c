package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A request net/http refuses before the sidecar's handler sees it (a
// malformed request line) is counted in
// kvroute_sidecar_server_refused_requests_total; before, the sidecar
// counted it nowhere.
func TestServeCountsRequestsNetHTTPRefuses(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	o, err := parseFlags([]string{"--host", "127.0.0.1", "--port", "0", "--metrics-port", "0",
		"--decoder", "http://127.0.0.1:1"})
	require.NoError(t, err)
	a, stop := startServe(t, o)
	defer stop()

	c, err := net.Dial("tcp", a[0])
	require.NoError(t, err)
	_, err = io.WriteString(c, "NOT A REQUEST LINE\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, c.Close())

	mr, err := http.Get("http://" + a[1] + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(mr.Body)
	require.NoError(t, err)
	require.NoError(t, mr.Body.Close())
	require.Contains(t, strings.Split(string(body), "\n"), "kvroute_sidecar_server_refused_requests_total 1")
	require.Contains(t, strings.Split(string(body), "\n"), "kvroute_sidecar_header_timeouts_total 0")
}

// A request net/http refuses on the metrics port is counted too, as the
// gateway counts it on its one listener, which serves /metrics; before,
// the metrics port's server was not watched.
func TestServeCountsRequestsRefusedOnTheMetricsPort(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	o, err := parseFlags([]string{"--host", "127.0.0.1", "--port", "0", "--metrics-port", "0",
		"--decoder", "http://127.0.0.1:1"})
	require.NoError(t, err)
	a, stop := startServe(t, o)
	defer stop()

	c, err := net.Dial("tcp", a[1])
	require.NoError(t, err)
	_, err = io.WriteString(c, "NOT A REQUEST LINE\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, c.Close())

	mr, err := http.Get("http://" + a[1] + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(mr.Body)
	require.NoError(t, err)
	require.NoError(t, mr.Body.Close())
	require.Contains(t, strings.Split(string(body), "\n"), "kvroute_sidecar_server_refused_requests_total 1")
}
