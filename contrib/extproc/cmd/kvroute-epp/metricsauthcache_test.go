package main

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// manualAuthClock drives the auth cache's expiry with a manual clock until
// the test ends.
func manualAuthClock(t *testing.T) *telemetry.Manual {
	t.Helper()
	clock := telemetry.NewManual(time.Unix(1e9, 0))
	old := metricsAuthClock
	metricsAuthClock = clock
	t.Cleanup(func() { metricsAuthClock = old })
	return clock
}

// newTestAuth is an auth asking api, with config, serving a metrics port
// on loopback, and a client of it.
func newTestAuth(t *testing.T, api *fakeAPIServer, config metricsAuthConfig) (*metricsAuth, string, *http.Client) {
	t.Helper()
	auth, err := newMetricsAuth(api.kube(t), config, telemetry.Set{Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	url := serveAuthMetrics(t, &metricsServing{auth: auth, pprof: true})
	c := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(c.CloseIdleConnections)
	return auth, url, c
}

// A repeated token is reviewed once per TTL: an allowance for the allow
// TTL, by token, verb and path; a refused token for the deny TTL, whatever
// the path, so that one bad token on many pprof paths costs one
// TokenReview. The TTLs given replace the defaults.
func TestMetricsAuthCacheTTL(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	clock := manualAuthClock(t)
	api := newFakeAPIServer(t)
	const allowTTL, denyTTL = 2 * time.Minute, 3 * time.Second
	auth, url, c := newTestAuth(t, api, metricsAuthConfig{allowTTL: allowTTL, denyTTL: denyTTL})

	for range 3 {
		require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper"))
	}
	require.EqualValues(t, 1, api.tokens.Load(), "an allowed caller is reviewed once per TTL")
	require.Equal(t, http.StatusOK, get(t, c, url+"/debug/pprof/heap", "scraper"))
	require.EqualValues(t, 2, api.tokens.Load(), "another path is another SubjectAccessReview")

	for i := range 5 {
		require.Equal(t, http.StatusUnauthorized, get(t, c, fmt.Sprintf("%s/debug/pprof/x%d", url, i), "forged"))
	}
	require.EqualValues(t, 3, api.tokens.Load(), "a refused token is reviewed once per deny TTL, whatever the path")
	require.Equal(t, 6.0, testutil.ToFloat64(auth.lookups.WithLabelValues("hit")))
	require.Equal(t, 3.0, testutil.ToFloat64(auth.lookups.WithLabelValues("miss")))

	clock.Advance(denyTTL - time.Nanosecond)
	require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/metrics", "forged"))
	require.EqualValues(t, 3, api.tokens.Load())
	clock.Advance(time.Nanosecond)
	require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/metrics", "forged"))
	require.EqualValues(t, 4, api.tokens.Load(), "reviewed again once the deny TTL is over")
	require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper"))
	require.EqualValues(t, 4, api.tokens.Load())

	clock.Advance(allowTTL - denyTTL)
	require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper"))
	require.EqualValues(t, 5, api.tokens.Load(), "reviewed again once the allow TTL is over")
	require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper"))
	require.EqualValues(t, 5, api.tokens.Load())
	require.Equal(t, 0.0, testutil.ToFloat64(auth.cacheFull))
}

// A caller that would need a review while --metrics-auth-max-in-flight are
// in flight is answered 503 busy without reaching the API server; a cached
// caller is still served, and the slots come back when the reviews end.
func TestMetricsAuthMaxInFlight(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	manualAuthClock(t)
	api := newFakeAPIServer(t)
	auth, url, c := newTestAuth(t, api, metricsAuthConfig{maxInFlight: 2})
	require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper"))

	api.hang.Store(true)
	held := make(chan int, 2)
	for i := range 2 {
		go func() {
			req, err := http.NewRequest(http.MethodGet, url+"/metrics", nil)
			if err != nil {
				held <- 0
				return
			}
			req.Header.Set("Authorization", fmt.Sprintf("Bearer random-%d", i))
			resp, err := c.Do(req)
			if err != nil {
				held <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			held <- resp.StatusCode
		}()
	}
	for range 2 {
		select {
		case <-api.hung:
		case <-time.After(time.Minute):
			t.Fatal("the held reviews did not reach the API server")
		}
	}
	reached := api.tokens.Load()
	for i := range 50 {
		resp := getResponse(t, c, url+"/metrics", fmt.Sprintf("random-more-%d", i))
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
	}
	require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper"), "a cached caller needs no review")
	require.Empty(t, api.hung, "no caller over the limit reached the API server")
	require.Equal(t, reached, api.tokens.Load())
	require.Equal(t, 50.0, testutil.ToFloat64(auth.results.WithLabelValues("busy")))

	api.hang.Store(false)
	api.release()
	for range 2 {
		require.Equal(t, http.StatusServiceUnavailable, <-held, "a review the API server does not answer is an error")
	}
	require.Equal(t, 2.0, testutil.ToFloat64(auth.results.WithLabelValues("error")))
	require.Equal(t, http.StatusForbidden, get(t, c, url+"/metrics", "stranger"), "the slots are back")
	require.Equal(t, 50.0, testutil.ToFloat64(auth.results.WithLabelValues("busy")))
}

// getResponse asks url with the bearer token and returns the response,
// its body read and closed.
func getResponse(t *testing.T, c *http.Client, url, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	return resp
}

// A stream of unknown tokens never holds more than
// --metrics-auth-cache-entries decisions, and evicts only denials: the
// scrapers' allowances stay cached. Allowances beyond the limit evict the
// oldest allowance; a denial with only allowances cached is not kept.
func TestMetricsAuthCacheBound(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	clock := manualAuthClock(t)
	api := newFakeAPIServer(t)
	const entries = 4
	auth, url, c := newTestAuth(t, api, metricsAuthConfig{cacheEntries: entries, reviewRate: 100}) // 200 reviews at once: the clock stands still

	require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper-a"))
	require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper-b"))
	for i := range 100 {
		require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/metrics", fmt.Sprintf("random-%d", i)))
		require.LessOrEqual(t, auth.cache.len(), entries)
	}
	require.Equal(t, 98.0, testutil.ToFloat64(auth.cacheFull), "each denial over the limit evicted an older one")
	reviewed := api.tokens.Load()
	require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper-a"))
	require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper-b"))
	require.Equal(t, reviewed, api.tokens.Load(), "the allowances outlived the stream of denials")
	require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/metrics", "random-99"))
	require.Equal(t, reviewed, api.tokens.Load(), "the newest denial is cached")

	// Allowances push the denials out, then the oldest allowance.
	for _, tok := range []string{"scraper-c", "scraper-d", "scraper-e"} {
		require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", tok))
	}
	require.Equal(t, entries, auth.cache.len())
	reviewed = api.tokens.Load()
	require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper-a"))
	require.Equal(t, reviewed+1, api.tokens.Load(), "the oldest allowance was evicted")
	full := testutil.ToFloat64(auth.cacheFull)
	require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/metrics", "forged"))
	require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/metrics", "forged"))
	require.Equal(t, reviewed+3, api.tokens.Load(), "a denial among allowances only is not kept")
	require.Equal(t, full+2, testutil.ToFloat64(auth.cacheFull))
	require.Equal(t, entries, auth.cache.len())

	// Expired entries make room before any live one is evicted.
	clock.Advance(defaultMetricsAuthAllowTTL)
	full = testutil.ToFloat64(auth.cacheFull)
	require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/metrics", "forged"))
	require.Equal(t, 1, auth.cache.len())
	require.Equal(t, full, testutil.ToFloat64(auth.cacheFull))
}

// Negative settings are refused; the zero value is the defaults.
func TestMetricsAuthConfig(t *testing.T) {
	require.Equal(t, metricsAuthConfig{allowTTL: time.Minute, denyTTL: 10 * time.Second, cacheEntries: 4096, maxInFlight: 8, reviewRate: 2},
		metricsAuthConfig{}.withDefaults())
	for _, args := range [][]string{
		{"--metrics-auth-allow-ttl", "-1s"}, {"--metrics-auth-deny-ttl", "-1s"},
		{"--metrics-auth-cache-entries", "-1"}, {"--metrics-auth-max-in-flight", "-1"},
		{"--metrics-auth-review-rate", "-1"}, {"--metrics-auth-review-rate", "NaN"}, {"--metrics-auth-review-rate", "+Inf"},
	} {
		_, err := parseFlags(append([]string{"--pool-name", "p"}, args...), io.Discard)
		require.ErrorContains(t, err, args[0])
	}
	_, err := parseFlags([]string{"--pool-name", "p", "--metrics-auth-deny-ttl", "1x"}, io.Discard)
	require.ErrorContains(t, err, "metrics-auth-deny-ttl")
	_, err = parseFlags([]string{"--pool-name", "p", "--metrics-endpoint-auth=false", "--metrics-auth-max-in-flight", "4"}, io.Discard)
	require.ErrorContains(t, err, "--metrics-endpoint-auth")
	_, err = parseFlags([]string{"--pool-name", "p", "--metrics-endpoint-auth=false", "--metrics-auth-review-rate", "4"}, io.Discard)
	require.ErrorContains(t, err, "--metrics-auth-review-rate")
	f, err := parseFlags([]string{"--pool-name", "p", "--metrics-auth-allow-ttl", "30s", "--metrics-auth-max-in-flight", "4", "--metrics-auth-review-rate", "0.5"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, metricsAuthConfig{allowTTL: 30 * time.Second, maxInFlight: 4, reviewRate: 0.5}, f.llmdServer.metricsAuthConfig)
}
