package gateway

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

const headerTimeoutsMetric = "kvroute_gateway_header_timeouts_total"

func TestServerCutsSlowHeadersAndCountsThem(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	cfg := testServerConfig(kvroute.Endpoint{ID: u.id})
	cfg.ReadHeaderTimeout = 300 * time.Millisecond
	cfg.Proxy.BodyReadTimeout = 300 * time.Millisecond
	// The keep-alive case below must begin its second header before the
	// connection's idle timeout: with a short one, a loaded machine that
	// deschedules the test between the first response and that first byte
	// lets the gateway close the connection as idle, and no late header
	// is ever seen. So this server never closes an idle connection during
	// the test; the idle case has a server of its own.
	cfg.IdleTimeout = time.Hour
	srv, err := NewServer(t.Context(), cfg, Options{})
	require.NoError(t, err)
	defer srv.Shutdown(context.Background())
	idleCfg := cfg
	idleCfg.IdleTimeout = 300 * time.Millisecond
	idle, err := NewServer(t.Context(), idleCfg, Options{})
	require.NoError(t, err)
	defer idle.Shutdown(context.Background())
	const request = "POST /v1/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"

	// A first header trickled one byte per 20 ms, for as long as the
	// connection takes them.
	c := dialGateway(t, srv.URL())
	defer c.Close()
	_, err = io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: gw\r\nX-Slow: ")
	require.NoError(t, err)
	stop := make(chan struct{})
	dripped := drip(c, "a", 20*time.Millisecond, stop)
	requireClosedByServer(t, bufio.NewReader(c))
	close(stop)
	<-dripped
	require.Eventually(t, func() bool { return metricValue(t, srv.Registry(), headerTimeoutsMetric) == 1 }, wait, time.Millisecond)

	// A keep-alive connection whose second header is slow.
	c2 := dialGateway(t, srv.URL())
	defer c2.Close()
	br := bufio.NewReader(c2)
	_, err = io.WriteString(c2, request)
	require.NoError(t, err)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = io.WriteString(c2, "POST /v1/completions HTTP/1.1\r\n")
	require.NoError(t, err)
	stop2 := make(chan struct{})
	dripped2 := drip(c2, "X", 20*time.Millisecond, stop2)
	requireClosedByServer(t, br)
	close(stop2)
	<-dripped2
	require.Eventually(t, func() bool { return metricValue(t, srv.Registry(), headerTimeoutsMetric) == 2 }, wait, time.Millisecond)

	// A second request whose first bytes came with the first (pipelined),
	// so that net/http reads none of its header after the connection goes
	// idle before its header timeout cuts it.
	c5 := dialGateway(t, srv.URL())
	defer c5.Close()
	br5 := bufio.NewReader(c5)
	_, err = io.WriteString(c5, request+"POST /v1/completions HTTP/1.1\r\nHost: gw\r\n")
	require.NoError(t, err)
	resp, err = http.ReadResponse(br5, nil)
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	requireClosedByServer(t, br5)
	require.Eventually(t, func() bool { return metricValue(t, srv.Registry(), headerTimeoutsMetric) == 3 }, wait, time.Millisecond)

	// Neither an idle keep-alive connection closed by IdleTimeout nor a
	// body trickled past the body read timeout counts as a late header.
	c3 := dialGateway(t, idle.URL())
	defer c3.Close()
	br3 := bufio.NewReader(c3)
	_, err = io.WriteString(c3, request)
	require.NoError(t, err)
	resp, err = http.ReadResponse(br3, nil)
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	requireClosedByServer(t, br3)
	require.Zero(t, metricValue(t, idle.Registry(), headerTimeoutsMetric), "an idle connection closed is no late header")

	c4 := dialGateway(t, srv.URL())
	defer c4.Close()
	_, err = io.WriteString(c4, "POST /v1/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 1000\r\n\r\n{")
	require.NoError(t, err)
	stop4 := make(chan struct{})
	dripped4 := drip(c4, " ", 20*time.Millisecond, stop4)
	br4 := bufio.NewReader(c4)
	resp, err = http.ReadResponse(br4, nil)
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	requireClosedByServer(t, br4)
	close(stop4)
	<-dripped4
	require.Eventually(t, func() bool {
		return counter(t, srv.Registry(), "completions", ResultBodyTimeout) == 1
	}, wait, time.Millisecond)
	require.Equal(t, 3.0, metricValue(t, srv.Registry(), headerTimeoutsMetric))
}

func TestNewServerRejectsNegativeTimeouts(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg := testServerConfig()
	cfg.ReadHeaderTimeout = -time.Second
	_, err := NewServer(t.Context(), cfg, Options{})
	require.ErrorContains(t, err, "readHeaderTimeout -1s is negative")
	cfg = testServerConfig()
	cfg.IdleTimeout = -time.Second
	_, err = NewServer(t.Context(), cfg, Options{})
	require.ErrorContains(t, err, "idleTimeout -1s is negative")
}

// Requests net/http refuses before the gateway's handler sees them (a
// malformed request line, a header over the size limit) are counted in
// kvroute_gateway_refused_requests_total; answered requests, and the
// gateway's own error answers, are not.
func TestServerCountsRequestsNetHTTPRefuses(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	srv, err := NewServer(t.Context(), testServerConfig(kvroute.Endpoint{ID: u.id}), Options{})
	require.NoError(t, err)
	defer srv.Shutdown(context.Background())
	const refused = "kvroute_gateway_refused_requests_total"
	status := func(raw string) int {
		t.Helper()
		c := dialGateway(t, srv.URL())
		defer c.Close()
		_, err := io.WriteString(c, raw)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		readAll(t, resp)
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, status("POST /v1/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"))
	require.Equal(t, http.StatusNotFound, status("GET /nowhere HTTP/1.1\r\nHost: gw\r\n\r\n"))
	require.Zero(t, metricValue(t, srv.Registry(), refused))

	require.Equal(t, http.StatusBadRequest, status("NOT A REQUEST LINE\r\n\r\n"))
	require.Equal(t, 1.0, metricValue(t, srv.Registry(), refused))
	// A header over the limit: net/http answers 431 and closes the
	// connection with the rest unread, so the client may see a reset
	// instead of the answer; the count is what matters.
	c := dialGateway(t, srv.URL())
	defer c.Close()
	_, _ = io.WriteString(c, "GET /health HTTP/1.1\r\nHost: gw\r\nX-Big: "+strings.Repeat("b", http.DefaultMaxHeaderBytes+8192)+"\r\n\r\n")
	require.Eventually(t, func() bool { return metricValue(t, srv.Registry(), refused) == 2 }, wait, time.Millisecond)
}

// A request the gateway answers without reading its body (a 405 on an
// inference route, a 404, /health) still has only Proxy.BodyReadTimeout to
// send it: net/http reads an unread body before the answer, and one that
// announces 100 bytes and never sends them gets the answer and has its
// connection closed, instead of holding both forever. A complete unread
// body leaves the connection open for the next request.
func TestServerClosesTheConnectionOfAnUnreadBodyPastItsReadTimeout(t *testing.T) {
	defer leakcheck.Check(t)()
	u := newUpstream(t)
	defer u.Close()
	cfg := testServerConfig(kvroute.Endpoint{ID: u.id})
	cfg.Proxy.BodyReadTimeout = 200 * time.Millisecond
	srv, err := NewServer(t.Context(), cfg, Options{})
	require.NoError(t, err)
	defer func() {
		// Bounded: a handler stuck on a body would hold an unbounded one.
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
	}()
	for _, tc := range []struct {
		head   string
		status int
	}{
		{"GET /v1/completions", http.StatusMethodNotAllowed},
		{"POST /nowhere", http.StatusNotFound},
		{"GET /health", http.StatusOK}, // a body on a GET: unread as well
		{"POST /health", http.StatusMethodNotAllowed},
	} {
		c := dialGateway(t, srv.URL()) // its read deadline: wait, far past 200ms
		_, err = io.WriteString(c, tc.head+" HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\n{")
		require.NoError(t, err)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err, "%s: no answer", tc.head)
		readAll(t, resp)
		require.Equal(t, tc.status, resp.StatusCode, tc.head)
		require.True(t, resp.Close, "%s: the answer closes the connection", tc.head)
		requireClosedByServer(t, br)
		c.Close()

		c = dialGateway(t, srv.URL())
		_, err = io.WriteString(c, tc.head+" HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\n{}"+tc.head+" HTTP/1.1\r\nHost: gw\r\n\r\n")
		require.NoError(t, err)
		br = bufio.NewReader(c)
		for range 2 {
			resp, err = http.ReadResponse(br, nil)
			require.NoError(t, err, "%s: a complete body keeps the connection", tc.head)
			readAll(t, resp)
			require.Equal(t, tc.status, resp.StatusCode, tc.head)
			require.False(t, resp.Close, tc.head)
		}
		c.Close()
	}
}
