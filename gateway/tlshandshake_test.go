package gateway

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// An engine named by an https Address that accepts the connection and
// never completes the TLS handshake (a hung engine or TLS proxy in front of
// it) is a 502 upstream_timeout, as a plain-HTTP engine that does not
// accept within the dial timeout is: without a handshake timeout the
// request hung for as long as its client waited, holding its body's share
// of the budget and its load on the endpoint.
func TestGatewayBoundsAnHTTPSEnginesTLSHandshake(t *testing.T) {
	defer leakcheck.Check(t)()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // accepted, never answered
			mu.Unlock()
		}
	})
	defer func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	}()

	// A handshake that never completes times out at any bound: a short
	// one keeps the test short.
	defer func(d time.Duration) { upstreamTLSHandshakeTimeout = d }(upstreamTLSHandshakeTimeout)
	upstreamTLSHandshakeTimeout = 100 * time.Millisecond
	reg := prometheus.NewRegistry()
	h, err := New(Config{}, new(RoundRobin), Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	defer h.Close()
	h.SetEndpoints([]kvroute.Endpoint{{ID: ln.Addr().String(), Address: "https://" + ln.Addr().String()}})

	// The bound only ends a test that would otherwise hang: the client
	// waits far longer than the handshake may take.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/completions", strings.NewReader(`{"model":"m","prompt":"hi"}`))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusBadGateway, rec.Code, rec.Body.String())
	require.Equal(t, 1.0, counter(t, reg, "completions", ResultUpstreamTimeout))
}
