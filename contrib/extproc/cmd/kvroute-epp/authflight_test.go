package main

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// N scrapes that arrive together with one new token cost one review:
// the first asks the API server, the others wait for its outcome and share
// it, taking no in-flight slot of their own (so none is refused busy with
// a single slot). Before, each took a slot and asked the API server.
func TestMetricsAuthMergesConcurrentReviews(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	manualAuthClock(t)
	api := newFakeAPIServer(t)
	auth, url, c := newTestAuth(t, api, metricsAuthConfig{maxInFlight: 1})
	const n = 8
	codes := joinOneReview(t, auth, api, c, url, "scraper-new", n)
	for range n {
		require.Equal(t, http.StatusOK, <-codes)
	}
	require.EqualValues(t, 1, api.tokens.Load(), "one TokenReview for n callers with one token")
	require.EqualValues(t, 1, api.access.Load())
	require.Equal(t, float64(n), testutil.ToFloat64(auth.lookups.WithLabelValues("miss")))
	require.Zero(t, testutil.ToFloat64(auth.results.WithLabelValues("busy")))
	require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper-new"), "then cached")
	require.EqualValues(t, 1, api.tokens.Load())
}

// A caller waiting for another's review gives up when its own context
// ends, and the review it waited for still completes for its leader.
func TestMetricsAuthWaiterHonoursItsContext(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	manualAuthClock(t)
	api := newFakeAPIServer(t)
	auth, _, _ := newTestAuth(t, api, metricsAuthConfig{})
	joined := make(chan struct{}, 1)
	auth.flights.onWait = func() { joined <- struct{}{} }
	gate := make(chan struct{})
	api.pause.Store(&gate)

	type outcome struct {
		d   authDecision
		err error
	}
	lead := make(chan outcome, 1)
	go func() {
		d, err := auth.decide(context.Background(), "scraper", "get", "/metrics")
		lead <- outcome{d, err}
	}()
	awaitSignal(t, api.hung, "the review did not reach the API server")
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() {
		_, err := auth.decide(ctx, "scraper", "get", "/metrics")
		waited <- err
	}()
	awaitSignal(t, joined, "the second caller did not join the review")
	cancel()
	err := <-waited
	require.ErrorIs(t, err, errAuthCanceled)
	require.ErrorIs(t, err, context.Canceled)
	api.pause.Store(nil)
	close(gate)
	o := <-lead
	require.NoError(t, o.err)
	require.Equal(t, authAllowed, o.d)
	require.EqualValues(t, 1, api.tokens.Load())
}

// A caller that leaves while it waits for another's review is counted as
// canceled, not as an API server error: nothing failed.
func TestMetricsAuthCountsALeavingWaiterAsCanceled(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	manualAuthClock(t)
	api := newFakeAPIServer(t)
	auth, _, _ := newTestAuth(t, api, metricsAuthConfig{})
	joined := make(chan struct{}, 1)
	auth.flights.onWait = func() { joined <- struct{}{} }
	gate := make(chan struct{})
	api.pause.Store(&gate)

	handled := make(chan struct{}, 1) // a request's handler has answered, its outcome counted
	guarded := auth.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{ReadHeaderTimeout: time.Minute, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		guarded.ServeHTTP(w, r)
		handled <- struct{}{}
	})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-served, http.ErrServerClosed)
	})
	c := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(c.CloseIdleConnections)

	lead := make(chan error, 1)
	go func() {
		_, err := auth.decide(context.Background(), "scraper", "get", "/metrics")
		lead <- err
	}()
	awaitSignal(t, api.hung, "the review did not reach the API server")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	left := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ln.Addr().String()+"/metrics", nil)
		if err == nil {
			req.Header.Set("Authorization", "Bearer scraper")
			var resp *http.Response
			if resp, err = c.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}
		left <- err
	}()
	awaitSignal(t, joined, "the caller did not join the review in flight")
	cancel() // the caller leaves; its connection closes
	require.ErrorIs(t, <-left, context.Canceled)
	awaitSignal(t, handled, "the waiter's handler did not return")
	require.Equal(t, 1.0, testutil.ToFloat64(auth.results.WithLabelValues("canceled")))
	require.Zero(t, testutil.ToFloat64(auth.results.WithLabelValues("error")))

	api.pause.Store(nil)
	close(gate)
	require.NoError(t, <-lead)
}

// awaitSignal waits for one signal on ch, failing the test with what after
// a minute.
func awaitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatal(what)
	}
}

// joinOneReview sends n callers with one token not yet reviewed to url's
// /metrics while the API server holds its answers, waits until one review
// has reached it and the other n-1 callers have joined that review, then
// lets the API server answer (the TokenReview, then its
// SubjectAccessReview); it returns the callers' status codes, 0 for a
// caller whose request failed.
func joinOneReview(t *testing.T, auth *metricsAuth, api *fakeAPIServer, c *http.Client, url, token string, n int) <-chan int {
	t.Helper()
	joined := make(chan struct{}, n)
	auth.flights.onWait = func() { joined <- struct{}{} }
	gate := make(chan struct{})
	api.pause.Store(&gate)
	codes := make(chan int, n)
	for range n {
		go func() {
			req, err := http.NewRequest(http.MethodGet, url+"/metrics", nil)
			if err != nil {
				codes <- 0
				return
			}
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := c.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			_ = resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	awaitSignal(t, api.hung, "the review did not reach the API server")
	for range n - 1 {
		awaitSignal(t, joined, "a caller did not join the review in flight")
	}
	api.pause.Store(nil)
	close(gate)
	return codes
}
