package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/httpbarrier"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// newBarrierEngine is an engine that holds every inference request until
// n of them are in flight at once (httpbarrier), so that each round of n
// concurrent requests needs n upstream connections at the same moment.
func newBarrierEngine(n int) *httpbarrier.Server {
	return httpbarrier.New(n, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" ok"}]}`)
	})
}

// proxyRounds sends rounds of n concurrent completions through h.
func proxyRounds(t *testing.T, h *Handler, n, rounds int) {
	t.Helper()
	for range rounds {
		var wg sync.WaitGroup
		codes := make(chan int, n)
		for range n {
			wg.Go(func() {
				req := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(`{"model":"m","prompt":"hi"}`))
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				codes <- rec.Code
			})
		}
		wg.Wait()
		close(codes)
		for c := range codes {
			require.Equal(t, http.StatusOK, c)
		}
	}
}

func newPoolHandler(t *testing.T, cfg Config, e *httpbarrier.Server) *Handler {
	t.Helper()
	h, err := New(cfg, new(RoundRobin), Options{})
	require.NoError(t, err)
	h.SetEndpoints([]kvroute.Endpoint{{ID: strings.TrimPrefix(e.URL, "http://")}})
	return h
}

// At 320 concurrent requests to one engine, every upstream connection goes
// back to the idle pool: the gateway opens 320 connections in the first
// round and none after (an idle cap of 256 per host closed 64 and redialed
// them every round).
func TestGatewayKeepsOneUpstreamConnectionPerConcurrentRequest(t *testing.T) {
	defer leakcheck.Check(t)()
	const n, rounds = 320, 4
	e := newBarrierEngine(n)
	defer e.Close()
	h := newPoolHandler(t, Config{}, e)
	defer h.Close()

	proxyRounds(t, h, n, rounds)
	require.Equal(t, int64(n), e.Accepted(), "connections accepted over %d rounds of %d concurrent requests", rounds, n)
}

// A smaller MaxIdleConnsPerHost is honoured: connections beyond it are
// closed after each round and redialed in the next.
func TestGatewayMaxIdleConnsPerHostCapsThePool(t *testing.T) {
	defer leakcheck.Check(t)()
	const n, rounds, idle = 8, 3, 2
	e := newBarrierEngine(n)
	defer e.Close()
	h := newPoolHandler(t, Config{MaxIdleConnsPerHost: idle}, e)
	defer h.Close()

	proxyRounds(t, h, n, rounds)
	require.Equal(t, int64(n+(rounds-1)*(n-idle)), e.Accepted())
}

// An engine's pool is warmed to the gateway's peak of requests in flight
// when a request finds it empty: after 8 concurrent requests to engine A,
// one request to engine B dials B once itself and has B's warmer dial 7
// more, so that 8 concurrent requests to B then find 8 idle connections
// and B accepts no more.
func TestGatewayWarmsAnEnginePoolToThePeakInFlight(t *testing.T) {
	defer leakcheck.Check(t)()
	const n = 8
	a, b := newBarrierEngine(n), newBarrierEngine(1)
	defer a.Close()
	defer b.Close()
	h := newPoolHandler(t, Config{}, a)
	defer h.Close()

	proxyRounds(t, h, n, 1)
	require.Equal(t, int64(n), a.Accepted())
	h.SetEndpoints([]kvroute.Endpoint{{ID: strings.TrimPrefix(b.URL, "http://")}})
	proxyRounds(t, h, 1, 1)
	h.ownsTr.WaitWarmers() // no request in flight: no warmer starts meanwhile
	require.Equal(t, n, h.ownsTr.IdleConns(strings.TrimPrefix(b.URL, "http://")), "B's pool is warmed to the peak")
	b.SetRound(n)
	proxyRounds(t, h, n, 2)
	require.Equal(t, int64(n), b.Accepted(), "B accepted its warmed connections and no more")
	require.Equal(t, int64(n), h.ownsTr.Stats().Dials-int64(n), "the gateway dialed B n times")
}
