package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--port", "0", "--decoder", "http://10.0.0.1:8001", "--prefill-timeout", "2s",
		"--max-body-bytes", "100", "--metrics-port", "0", "--body-read-timeout", "5s", "--max-body-bytes-in-flight", "1000",
		"--response-write-timeout", "7s", "--allow-client-kv-transfer-params"})
	require.NoError(t, err)
	require.True(t, o.cfg.AllowClientKVTransferParams)
	require.Equal(t, 0, o.port)
	require.Equal(t, "http://10.0.0.1:8001", o.cfg.DecoderURL)
	require.Equal(t, 2*time.Second, o.cfg.PrefillTimeout)
	require.Equal(t, int64(100), o.cfg.MaxBodyBytes)
	require.Equal(t, 5*time.Second, o.cfg.BodyReadTimeout)
	require.Equal(t, int64(1000), o.cfg.MaxBodyBytesInFlight)
	require.Equal(t, 7*time.Second, o.cfg.ResponseWriteTimeout)
	o2, err := parseFlags(nil)
	require.NoError(t, err)
	require.False(t, o2.cfg.AllowClientKVTransferParams, "removed by default")
	_, err = parseFlags([]string{"--prefill-timeout", "30"})
	require.ErrorContains(t, err, "prefill-timeout")
	_, err = parseFlags([]string{"--help"})
	require.ErrorIs(t, err, flag.ErrHelp)
	_, err = parseFlags([]string{"x"})
	require.Error(t, err)
	require.Equal(t, defaultIdleTimeout, o.idleTimeout)
	_, err = parseFlags([]string{"--idle-timeout", "0s"})
	require.ErrorContains(t, err, "idle-timeout")
}

// The binary's serve loop in front of simulated engines: a split request
// answers, /metrics counts it, and cancelling the context stops everything.
func TestServeSplitsAndStops(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dec, pre := startPDEngines(t)
	o, err := parseFlags([]string{"--host", "127.0.0.1", "--port", "0", "--metrics-port", "0", "--decoder", "http://" + dec.Addr()})
	require.NoError(t, err)
	a, stop := startServe(t, o)
	postSplit(t, a[0], pre.Addr())
	require.Contains(t, getBody(t, "http://"+a[1]+"/metrics"), `kvroute_sidecar_requests_total{outcome="split"} 1`)
	stop()
	http.DefaultClient.CloseIdleConnections()
}

// startPDEngines starts a decode and a prefill simulated engine, closed
// when the test ends.
func startPDEngines(t *testing.T) (dec, pre *server.Server) {
	t.Helper()
	eng := simengine.Config{BlockSize: 4, DecodeStep: time.Millisecond, PrefillTokensPerSecond: 1e6}
	start := func(role string) *server.Server {
		s, err := server.New(server.Config{Model: "m", Engine: eng, PD: server.PDConfig{Role: role}}, server.Options{})
		require.NoError(t, err)
		require.NoError(t, s.Start("127.0.0.1:0"))
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	}
	return start(server.RoleDecode), start(server.RolePrefill)
}

// postSplit sends a completion through the sidecar at addr with the
// prefiller header naming prefiller, and checks it is answered 200.
func postSplit(t *testing.T, addr, prefiller string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/completions",
		strings.NewReader(`{"model":"m","prompt":"hello there from the sidecar binary","max_tokens":4}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-prefiller-host-port", prefiller)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
}

// getBody GETs url and returns its body.
func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return string(b)
}

// startServe runs the binary's serve loop with o and returns the client and
// metrics listeners' addresses, and stop, which cancels it and checks that
// it ended cleanly.
func startServe(t *testing.T, o *options) (addrs [2]string, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, o, slog.New(slog.DiscardHandler), func(a, m string) { ready <- [2]string{a, m} })
	}()
	return <-ready, func() {
		cancel()
		require.NoError(t, <-done)
	}
}

// A negative --shutdown-timeout is refused, as the gateway refuses its
// own: it would end the requests in flight at SIGTERM at once instead of
// letting them finish. Zero stays valid (stop without waiting).
func TestParseFlagsRefusesANegativeShutdownTimeout(t *testing.T) {
	_, err := parseFlags([]string{"--shutdown-timeout", "-1s"})
	require.ErrorContains(t, err, "--shutdown-timeout must be >= 0")
	o, err := parseFlags([]string{"--shutdown-timeout", "0s"})
	require.NoError(t, err)
	require.Zero(t, o.shutdownTimeout)
}

// --metrics-port takes -1 to disable /metrics and nothing lower: -2 was read
// as -1, turning the metrics off silently.
func TestParseFlagsRefusesAMetricsPortBelowMinusOne(t *testing.T) {
	_, err := parseFlags([]string{"--metrics-port", "-2"})
	require.ErrorContains(t, err, "--metrics-port")
	o, err := parseFlags([]string{"--metrics-port", "-1"})
	require.NoError(t, err)
	require.Equal(t, -1, o.metricsPort)
}
