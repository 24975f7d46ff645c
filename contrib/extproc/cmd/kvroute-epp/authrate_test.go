package main

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// Reviews are started at most --metrics-auth-review-rate a second, twice
// that at once: a caller over it is answered 503 throttled with
// Retry-After, at once and without reaching the API server, where
// client-go would have queued it ahead of the scrapers' reviews. Cached
// decisions, and callers sharing a review in flight, take nothing from
// the rate.
func TestMetricsAuthReviewRate(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	clock := manualAuthClock(t)
	api := newFakeAPIServer(t)
	auth, url, c := newTestAuth(t, api, metricsAuthConfig{reviewRate: 1}) // 2 at once
	require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper"))
	require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/metrics", "random-0"))
	reviewed := api.tokens.Load()
	for i := range 20 {
		resp := getResponse(t, c, url+"/metrics", fmt.Sprintf("random-more-%d", i))
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
	}
	require.Equal(t, reviewed, api.tokens.Load(), "no caller over the rate reached the API server")
	for range 5 {
		require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper"), "a cached caller needs no review")
		require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/metrics", "random-0"))
	}
	require.Equal(t, 20.0, testutil.ToFloat64(auth.results.WithLabelValues("throttled")))
	require.Zero(t, testutil.ToFloat64(auth.results.WithLabelValues("busy")))

	// A second later one review may start: the callers that join it share
	// its outcome and take nothing more.
	clock.Advance(time.Second)
	const n = 4
	codes := joinOneReview(t, auth, api, c, url, "scraper-new", n)
	for range n {
		require.Equal(t, http.StatusOK, <-codes)
	}
	require.Equal(t, http.StatusServiceUnavailable, get(t, c, url+"/metrics", "random-late"), "the second's review is spent")
	require.Equal(t, 21.0, testutil.ToFloat64(auth.results.WithLabelValues("throttled")))
	clock.Advance(2 * time.Second)
	require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/metrics", "random-late"))
	require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/metrics", "random-later"))
	require.Equal(t, http.StatusServiceUnavailable, get(t, c, url+"/metrics", "random-latest"), "no more than two at once")
	require.Equal(t, 22.0, testutil.ToFloat64(auth.results.WithLabelValues("throttled")))
}

// The bucket holds two seconds of reviews, at least one, and a caller
// refused is told to retry once a review can start, in whole seconds.
func TestReviewBucket(t *testing.T) {
	now := time.Unix(1e9, 0)
	for _, tc := range []struct {
		rate  float64
		burst int
		retry string
	}{{2, 4, "1"}, {0.25, 1, "4"}, {0.3, 1, "4"}, {1.2, 3, "1"}} {
		b := newReviewBucket(tc.rate, now)
		for range tc.burst {
			require.True(t, b.take(now), "rate %v", tc.rate)
		}
		require.False(t, b.take(now), "rate %v", tc.rate)
		require.Equal(t, tc.retry, b.retryAfter(), "rate %v", tc.rate)
		require.False(t, b.take(now.Add(-time.Hour)), "a clock stepping back adds nothing")
		require.True(t, b.take(now.Add(time.Duration(math.Ceil(float64(time.Second)/tc.rate)))), "rate %v", tc.rate)
	}
	// A tiny rate the flag accepts still gives a Retry-After of an hour at
	// most, not hundreds of digits.
	b := newReviewBucket(1e-300, now)
	require.True(t, b.take(now))
	require.False(t, b.take(now))
	require.Equal(t, "3600", b.retryAfter())
}
