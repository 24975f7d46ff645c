package render

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/h1pool"
	"github.com/kvroute/kvroute/internal/httpbarrier"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// newBarrierRenderer is a renderer that holds every request until n of
// them are in flight at once (httpbarrier), so that each round of n
// concurrent renders needs n connections at the same moment.
func newBarrierRenderer(n int) *httpbarrier.Server { return httpbarrier.New(n, vllmRender) }

// renderRounds runs rounds of n concurrent renders through c.
func renderRounds(t *testing.T, c *Client, n, rounds int) {
	t.Helper()
	for range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				if _, err := c.Render(context.Background(), completions("hello")); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
}

// At 64 concurrent renders on one host, every connection goes back to the
// idle pool: the client opens 64 connections in the first round and none
// after (an idle cap of 16 per host closed 48 and redialed them every round).
func TestRenderKeepsOneConnectionPerConcurrentCall(t *testing.T) {
	defer leakcheck.Check(t)()
	const n, rounds = 64, 5
	s := newBarrierRenderer(n)
	defer s.Close()
	cfg := testConfig()
	cfg.URL = s.URL
	cfg.MaxConcurrency = new(0) // every render of a round reaches the renderer at once
	c, err := New(cfg, Options{})
	require.NoError(t, err)
	defer c.Close()

	renderRounds(t, c, n, rounds)
	require.Equal(t, int64(n), s.Accepted(), "connections accepted over %d rounds of %d concurrent renders", rounds, n)
}

// The concurrency limit also caps the connections to a renderer: many
// callers rendering back to back, always more of them than the limit, never
// make the client hold more connections than renders it lets in flight, and
// the client closes none of them. With net/http's Transport, which the
// client used before, neither held: net/http returned a connection to its
// idle pool on its read goroutine, after the caller had read the answer and
// released its slot (a render started in that moment dialed one more), and
// closed a connection whose request write its writer goroutine had not
// reported within 50 ms of the answer (on a busy machine). The client's
// transport (internal/h1pool) gives a connection back on the render's own
// goroutine, before the slot is released, with no time limit.
func TestRenderConnectionsStayWithinTheConcurrencyLimit(t *testing.T) {
	defer leakcheck.Check(t)()
	const limit, callers, each = 3, 12, 40
	var accepted atomic.Int64
	s := httptest.NewUnstartedServer(http.HandlerFunc(vllmRender))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			accepted.Add(1)
		}
	}
	s.Start()
	defer s.Close()
	cfg := testConfig()
	cfg.URL = s.URL
	cfg.MaxConcurrency = new(limit)
	cfg.MaxQueueWait = new(time.Minute) // every render waits for its slot
	c, err := New(cfg, Options{})
	require.NoError(t, err)
	defer c.Close()

	var wg sync.WaitGroup
	errs := make(chan error, callers*each)
	for range callers {
		wg.Go(func() {
			for range each {
				if _, err := c.Render(context.Background(), completions("hello")); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, accepted.Load(), int64(limit), "connections accepted over %d renders by %d callers", callers*each, callers)
	require.Equal(t, float64(accepted.Load()), testutil.ToFloat64(c.metrics.connDialed), "the client counts its dials")
	for r, m := range c.metrics.connClosed {
		require.Zero(t, testutil.ToFloat64(m), "connections the client closed (%v)", h1pool.CloseReason(r))
	}
}

// A smaller MaxIdleConnsPerHost is honoured: connections beyond it are
// closed after each round and redialed in the next.
func TestRenderMaxIdleConnsPerHostCapsThePool(t *testing.T) {
	defer leakcheck.Check(t)()
	const n, rounds, idle = 8, 3, 2
	s := newBarrierRenderer(n)
	defer s.Close()
	cfg := testConfig()
	cfg.URL = s.URL
	cfg.MaxConcurrency = new(0) // every render of a round reaches the renderer at once
	cfg.MaxIdleConnsPerHost = idle
	c, err := New(cfg, Options{})
	require.NoError(t, err)
	defer c.Close()

	renderRounds(t, c, n, rounds)
	require.Equal(t, int64(n+(rounds-1)*(n-idle)), s.Accepted())
}

func TestLoadConfigReadsMaxIdleConnsPerHost(t *testing.T) {
	cfg, err := LoadConfig(strings.NewReader(`{"maxIdleConnsPerHost": 8}`))
	require.NoError(t, err)
	require.Equal(t, 8, cfg.MaxIdleConnsPerHost)
	require.Equal(t, DefaultMaxIdleConnsPerHost, DefaultConfig().MaxIdleConnsPerHost)
	_, err = LoadConfig(strings.NewReader(`{"maxIdleConnsPerHost": -1}`))
	require.ErrorIs(t, err, ErrInvalidConfig)
}
