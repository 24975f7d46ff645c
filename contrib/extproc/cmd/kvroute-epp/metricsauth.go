package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kvroute/kvroute/telemetry"
)

// --metrics-endpoint-auth: as llm-d's router EPP (controller-runtime's
// metrics filter), each caller of the metrics port's /metrics, status page
// and pprof handlers presents a Kubernetes bearer token, which the API
// server authenticates (TokenReview) and authorizes for the request's
// non-resource URL and verb (SubjectAccessReview: GET /metrics is verb get
// on /metrics, as a Prometheus ClusterRole grants it). No or a refused
// token is answered 401, a caller not allowed 403, and an API server that
// fails or does not answer within metricsAuthTimeout 503, so that a scrape
// never hangs on it. /ready stays open: the kubelet probes it without a
// token.
//
// Decisions are cached by an HMAC of the token (authcache.go): a token
// the API server refused under the token alone, whatever the path, and
// the other decisions with the verb and path, for the allow TTL when
// allowed and the deny TTL otherwise, in a bounded cache. A caller whose
// decision is not cached when the reviews in flight are at their limit,
// or when the reviews started have reached their rate (authrate.go), is
// answered 503 without asking the API server, so that a stream of
// unknown tokens costs the API server at most that many reviews at once
// and that many a second, and is refused at once rather than queued by
// the Kubernetes client ahead of the scrapers' reviews.
// Lookups are counted in kvroute_epp_metrics_auth_cache_total, decisions
// that found the cache full of live entries in
// kvroute_epp_metrics_auth_cache_full_total.

// maxBearerTokenBytes bounds a token sent on to the API server; a longer
// one is refused unread (service account tokens are about 1 KiB).
const maxBearerTokenBytes = 16 << 10

// metricsAuthTimeout bounds each request's reviews by the API server;
// tests shorten it.
var metricsAuthTimeout = 5 * time.Second

// metricsAuthClock drives the cache's expiry; tests replace it with a
// telemetry.Manual clock.
var metricsAuthClock telemetry.Clock = telemetry.Wall

// authDecision is the outcome of a caller's reviews.
type authDecision uint8

const (
	authAllowed authDecision = iota
	authForbidden
	authUnauthenticated
)

// metricsAuth authenticates and authorizes the metrics port's callers.
type metricsAuth struct {
	kube      kubernetes.Interface
	log       *slog.Logger
	config    metricsAuthConfig // defaults applied
	hmacKey   []byte            // random, so that the cache's keys cannot be precomputed from tokens
	cache     *authCache
	inFlight  chan struct{} // a slot per review asked; config.maxInFlight
	flights   authFlights   // the reviews in flight by cache key, each holding a slot
	started   *reviewBucket // the reviews started a second; config.reviewRate
	results   *prometheus.CounterVec
	lookups   *prometheus.CounterVec
	cacheFull prometheus.Counter
	set       telemetry.Set // where the counters are registered
}

// newMetricsAuth asks kube's API server about callers, caches its
// decisions and bounds its reviews as config says (zero fields: the
// defaults), and counts them in set's registry.
func newMetricsAuth(kube kubernetes.Interface, config metricsAuthConfig, set telemetry.Set) (*metricsAuth, error) {
	if err := config.check(); err != nil {
		return nil, err
	}
	config = config.withDefaults()
	a := &metricsAuth{
		kube:     kube,
		log:      set.Log(),
		config:   config,
		hmacKey:  make([]byte, sha256.Size),
		cache:    newAuthCache(config.cacheEntries),
		inFlight: make(chan struct{}, config.maxInFlight),
		started:  newReviewBucket(config.reviewRate, metricsAuthClock.Now()),
		set:      set,
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_epp_metrics_auth_total",
			Help: "Requests to the metrics port's authenticated handlers (--metrics-endpoint-auth), by result: allowed, forbidden (403), unauthenticated (401), error (503, the API server failed or did not answer), canceled (the caller left while it waited for another caller's review of its token and path), busy (503, not cached while --metrics-auth-max-in-flight reviews were in flight; the API server was not asked) or throttled (503, not cached when --metrics-auth-review-rate reviews had been started; the API server was not asked).",
		}, []string{"result"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_epp_metrics_auth_cache_total",
			Help: "Metrics-port requests with a bearer token (--metrics-endpoint-auth), by result: hit (answered from the cache of decisions) or miss (reviewed by the API server, or refused busy or throttled).",
		}, []string{"result"}),
		cacheFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_epp_metrics_auth_cache_full_total",
			Help: "Metrics-port auth decisions that found the cache at --metrics-auth-cache-entries live entries: the oldest denial (or, for an allowance with no denial cached, the oldest allowance) was evicted, or the decision, a denial among allowances only, was not kept.",
		}),
	}
	if _, err := rand.Read(a.hmacKey); err != nil {
		return nil, err
	}
	for _, r := range []string{"allowed", "forbidden", "unauthenticated", "error", "canceled", "busy", "throttled"} {
		a.results.WithLabelValues(r)
	}
	for _, r := range []string{"hit", "miss"} {
		a.lookups.WithLabelValues(r)
	}
	if err := set.Register(a.results, a.lookups, a.cacheFull); err != nil {
		return nil, err
	}
	return a, nil
}

// close unregisters the auth's metrics.
func (a *metricsAuth) close() { a.set.Unregister(a.results, a.lookups, a.cacheFull) }

// wrap serves h to the callers allowed to call it.
func (a *metricsAuth) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			a.results.WithLabelValues("unauthenticated").Inc()
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		d, err := a.decide(r.Context(), token, authVerb(r.Method), r.URL.Path)
		switch {
		case errors.Is(err, errAuthBusy):
			a.results.WithLabelValues("busy").Inc()
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many callers are being reviewed by the Kubernetes API server; retry", http.StatusServiceUnavailable)
		case errors.Is(err, errAuthThrottled):
			a.results.WithLabelValues("throttled").Inc()
			w.Header().Set("Retry-After", a.started.retryAfter())
			http.Error(w, "too many callers have been sent to the Kubernetes API server for review; retry", http.StatusServiceUnavailable)
		case errors.Is(err, errAuthCanceled): // the caller has left: nothing failed, and no one reads the answer
			a.results.WithLabelValues("canceled").Inc()
			http.Error(w, "the request ended before its review", http.StatusServiceUnavailable)
		case err != nil:
			a.results.WithLabelValues("error").Inc()
			a.log.Warn("metrics port: the Kubernetes API server could not review a caller", "err", err)
			http.Error(w, "the Kubernetes API server could not review the request", http.StatusServiceUnavailable)
		case d == authUnauthenticated:
			a.results.WithLabelValues("unauthenticated").Inc()
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		case d == authForbidden:
			a.results.WithLabelValues("forbidden").Inc()
			http.Error(w, "Forbidden", http.StatusForbidden)
		default:
			a.results.WithLabelValues("allowed").Inc()
			h.ServeHTTP(w, r)
		}
	})
}

// bearerToken is the token of an "Authorization: Bearer" header, if it
// has one of at most maxBearerTokenBytes.
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || len(token) > maxBearerTokenBytes {
		return "", false
	}
	return token, true
}

// authVerb is the Kubernetes verb of an HTTP method on a non-resource URL.
func authVerb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return "unknown"
}

// errAuthBusy is decide's answer to a caller it would have to review when
// config.maxInFlight reviews are in flight.
var errAuthBusy = errors.New("metrics port: too many reviews in flight")

// errAuthThrottled is decide's answer to a caller it would have to review
// when config.reviewRate reviews have been started (authrate.go).
var errAuthThrottled = errors.New("metrics port: too many reviews started")

// errAuthCanceled is decide's answer, wrapping the context's error, to a
// caller whose context ended while it waited for another's review.
var errAuthCanceled = errors.New("metrics port: the caller left while its review was in flight")

// key is the cache key of token, followed by verb and path unless they
// are empty.
func (a *metricsAuth) key(token, verb, path string) authKey {
	h := hmac.New(sha256.New, a.hmacKey)
	parts := []string{token}
	if verb != "" {
		parts = append(parts, verb, path)
	}
	for _, s := range parts {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var k authKey
	h.Sum(k[:0])
	return k
}

// decide returns the cached decision on token for verb on path or asks the
// API server, caching its answer. Callers missing the cache on the same
// key while its review is in flight share that review (authflight.go), so
// that N scrapes with one new token cost one review; a waiter gives up
// when ctx ends (errAuthCanceled). An error is the API server's failure,
// not cached, errAuthCanceled, errAuthBusy or errAuthThrottled. Only the
// reviews started take from the rate: a cached decision or a shared
// review does not.
func (a *metricsAuth) decide(ctx context.Context, token, verb, path string) (authDecision, error) {
	tokenKey, key := a.key(token, "", ""), a.key(token, verb, path)
	now := metricsAuthClock.Now()
	d, ok := a.cache.get(tokenKey, now) // refused tokens, whatever the path
	if !ok {
		d, ok = a.cache.get(key, now)
	}
	if ok {
		a.lookups.WithLabelValues("hit").Inc()
		return d, nil
	}
	a.lookups.WithLabelValues("miss").Inc()
	f, leader, err := a.flights.join(key, a.inFlight, func() bool { return a.started.take(metricsAuthClock.Now()) })
	if err != nil {
		return 0, err
	}
	if !leader { // the same review is in flight: its outcome is ours
		select {
		case <-f.done:
			return f.d, f.err
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: %w", errAuthCanceled, ctx.Err())
		}
	}
	// Not cancelled with the leader's request: its waiters share the
	// outcome, which metricsAuthTimeout bounds.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), metricsAuthTimeout)
	d, err = a.review(rctx, token, verb, path)
	cancel()
	if err == nil {
		a.remember(d, key, tokenKey)
	}
	a.flights.finish(key, f, a.inFlight, d, err) // after the cache has it, so no caller asks again
	return d, err
}

// remember caches d, the review's decision on key: a refused token under
// tokenKey, whatever the path.
func (a *metricsAuth) remember(d authDecision, key, tokenKey authKey) {
	ttl := a.config.denyTTL
	switch d {
	case authAllowed:
		ttl = a.config.allowTTL
	case authUnauthenticated:
		key = tokenKey
	}
	now := metricsAuthClock.Now()
	if a.cache.put(key, d, now.Add(ttl), now) {
		a.cacheFull.Inc()
	}
}

// review asks the API server who token is and whether it may verb path.
func (a *metricsAuth) review(ctx context.Context, token, verb, path string) (authDecision, error) {
	tr, err := a.kube.AuthenticationV1().TokenReviews().Create(ctx,
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return 0, err
	}
	if !tr.Status.Authenticated {
		return authUnauthenticated, nil
	}
	u := tr.Status.User
	extra := make(map[string]authzv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return 0, err
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return authForbidden, nil
	}
	return authAllowed, nil
}
