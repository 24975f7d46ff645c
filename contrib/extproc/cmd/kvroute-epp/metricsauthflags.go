package main

import (
	"flag"
	"fmt"
	"math"
	"time"
)

// The defaults of --metrics-endpoint-auth's cache and review limits.
const (
	// defaultMetricsAuthAllowTTL is how long an allowed caller is not
	// asked about again: a scraper's token is reviewed about once a
	// minute, as controller-runtime's metrics filter (llm-d's) caches a
	// TokenReview.
	defaultMetricsAuthAllowTTL = time.Minute
	// defaultMetricsAuthDenyTTL is how long a refused token or a
	// forbidden caller is answered from the cache: short, so that a
	// RoleBinding just made takes effect soon.
	defaultMetricsAuthDenyTTL = 10 * time.Second
	// defaultMetricsAuthCacheEntries bounds the cache: about 150 bytes
	// an entry, so about 600 KiB in all.
	defaultMetricsAuthCacheEntries = 4096
	// defaultMetricsAuthMaxInFlight bounds the reviews asked of the API
	// server at once: a few scrapers need one or two, and a caller
	// sending unknown tokens gets no more.
	defaultMetricsAuthMaxInFlight = 8
	// defaultMetricsAuthReviewRate bounds the reviews started a second
	// (authrate.go), two seconds' worth at once: at two API requests a
	// review, 4 requests a second and 8 at once on the reviews' own
	// Kubernetes client, limited to just that (reviewClientLimits), so
	// that reviews are refused by the picker rather than queued by
	// client-go.
	defaultMetricsAuthReviewRate = 2.0
	// maxMetricsAuthReviewRate bounds --metrics-auth-review-rate: far past
	// what an API server answers, and small enough that the reviews'
	// client's burst (reviewClientLimits) is a positive int, which
	// client-go requires, where a larger rate would overflow it and fail
	// kvroute-epp's start with client-go's error.
	maxMetricsAuthReviewRate = 1e6
)

// metricsAuthConfig is the metrics port's auth cache and review limits;
// the zero value of each field is its default.
type metricsAuthConfig struct {
	allowTTL     time.Duration // --metrics-auth-allow-ttl
	denyTTL      time.Duration // --metrics-auth-deny-ttl
	cacheEntries int           // --metrics-auth-cache-entries
	maxInFlight  int           // --metrics-auth-max-in-flight
	reviewRate   float64       // --metrics-auth-review-rate, reviews started a second
}

// addMetricsAuthFlags defines the flags setting c on fs.
func addMetricsAuthFlags(fs *flag.FlagSet, c *metricsAuthConfig) {
	fs.DurationVar(&c.allowTTL, "metrics-auth-allow-ttl", 0, fmt.Sprintf("with --metrics-endpoint-auth: how long an allowed metrics caller (token, verb and path) is served without asking the API server again (0: %v)", defaultMetricsAuthAllowTTL))
	fs.DurationVar(&c.denyTTL, "metrics-auth-deny-ttl", 0, fmt.Sprintf("with --metrics-endpoint-auth: how long a token the API server refused, or a caller it did not allow, is answered 401 or 403 without asking again (0: %v)", defaultMetricsAuthDenyTTL))
	fs.IntVar(&c.cacheEntries, "metrics-auth-cache-entries", 0, fmt.Sprintf("with --metrics-endpoint-auth: decisions cached at most; when full of live ones a new decision evicts the oldest denial (0: %d)", defaultMetricsAuthCacheEntries))
	fs.IntVar(&c.maxInFlight, "metrics-auth-max-in-flight", 0, fmt.Sprintf("with --metrics-endpoint-auth: reviews asked of the API server at once; a caller not cached beyond them is answered 503 unreviewed (0: %d)", defaultMetricsAuthMaxInFlight))
	fs.Float64Var(&c.reviewRate, "metrics-auth-review-rate", 0, fmt.Sprintf("with --metrics-endpoint-auth: reviews started a second, twice that at once (at least one); a caller not cached beyond them is answered 503 unreviewed, so that a stream of unknown tokens is refused at once rather than queued by the Kubernetes client ahead of the scrapers' reviews; at most %d (0: %v)", int(maxMetricsAuthReviewRate), defaultMetricsAuthReviewRate))
}

// set reports whether any of c's fields is given.
func (c metricsAuthConfig) set() bool { return c != metricsAuthConfig{} }

// check refuses negative settings and a review rate that is not finite
// or over maxMetricsAuthReviewRate.
func (c metricsAuthConfig) check() error {
	switch {
	case c.allowTTL < 0:
		return fmt.Errorf("--metrics-auth-allow-ttl %v is negative", c.allowTTL)
	case c.denyTTL < 0:
		return fmt.Errorf("--metrics-auth-deny-ttl %v is negative", c.denyTTL)
	case c.cacheEntries < 0:
		return fmt.Errorf("--metrics-auth-cache-entries %d is negative", c.cacheEntries)
	case c.maxInFlight < 0:
		return fmt.Errorf("--metrics-auth-max-in-flight %d is negative", c.maxInFlight)
	case !(c.reviewRate >= 0) || math.IsInf(c.reviewRate, 0):
		return fmt.Errorf("--metrics-auth-review-rate %v is not a finite rate of zero or more", c.reviewRate)
	case c.reviewRate > maxMetricsAuthReviewRate:
		return fmt.Errorf("--metrics-auth-review-rate %v is over %d reviews a second", c.reviewRate, int(maxMetricsAuthReviewRate))
	}
	return nil
}

// withDefaults is c with each zero field set to its default.
func (c metricsAuthConfig) withDefaults() metricsAuthConfig {
	if c.allowTTL == 0 {
		c.allowTTL = defaultMetricsAuthAllowTTL
	}
	if c.denyTTL == 0 {
		c.denyTTL = defaultMetricsAuthDenyTTL
	}
	if c.cacheEntries == 0 {
		c.cacheEntries = defaultMetricsAuthCacheEntries
	}
	if c.maxInFlight == 0 {
		c.maxInFlight = defaultMetricsAuthMaxInFlight
	}
	if c.reviewRate == 0 {
		c.reviewRate = defaultMetricsAuthReviewRate
	}
	return c
}
