package main

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"strings"
	"sync"
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
// Decisions are cached by a hash of the token, the verb and the path, for
// metricsAuthAllowTTL when allowed and metricsAuthDenyTTL otherwise, in at
// most metricsAuthCacheEntries entries of a fixed size; a decision that
// finds the cache full of live entries is not kept, and counted in
// kvroute_epp_metrics_auth_cache_full_total.

const (
	// metricsAuthAllowTTL is how long an allowed caller is not asked
	// about again: a scraper's token is reviewed about once a minute, as
	// controller-runtime's filter caches it.
	metricsAuthAllowTTL = time.Minute
	// metricsAuthDenyTTL is how long a refused token or a forbidden
	// caller is answered from the cache: short, so that a RoleBinding
	// just made takes effect soon.
	metricsAuthDenyTTL = 10 * time.Second
	// metricsAuthCacheEntries bounds the cache: each entry is a 32-byte
	// key and a decision with its expiry, under 100 bytes with the map's
	// own overhead, so under 400 KiB in all.
	metricsAuthCacheEntries = 4096
	// maxBearerTokenBytes bounds a token sent on to the API server; a
	// longer one is refused unread (service account tokens are about 1 KiB).
	maxBearerTokenBytes = 16 << 10
)

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

// authEntry is a cached decision and when it expires.
type authEntry struct {
	decision authDecision
	expires  time.Time
}

// metricsAuth authenticates and authorizes the metrics port's callers.
type metricsAuth struct {
	kube       kubernetes.Interface
	log        *slog.Logger
	maxEntries int // metricsAuthCacheEntries; tests lower it
	mu         sync.Mutex
	cache      map[[sha256.Size]byte]authEntry
	results    *prometheus.CounterVec
	cacheFull  prometheus.Counter
	set        telemetry.Set // where results and cacheFull are registered
}

// newMetricsAuth asks kube's API server about callers and counts its
// decisions in set's registry.
func newMetricsAuth(kube kubernetes.Interface, set telemetry.Set) (*metricsAuth, error) {
	a := &metricsAuth{
		kube:       kube,
		maxEntries: metricsAuthCacheEntries,
		log:        set.Log(),
		set:        set,
		cache:      make(map[[sha256.Size]byte]authEntry),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvroute_epp_metrics_auth_total",
			Help: "Requests to the metrics port's authenticated handlers (--metrics-endpoint-auth), by result: allowed, forbidden (403), unauthenticated (401) or error (503, the API server failed or did not answer).",
		}, []string{"result"}),
		cacheFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvroute_epp_metrics_auth_cache_full_total",
			Help: "Metrics-port auth decisions not cached because the cache held its limit of live entries; the next request with the same token asks the API server again.",
		}),
	}
	for _, r := range []string{"allowed", "forbidden", "unauthenticated", "error"} {
		a.results.WithLabelValues(r)
	}
	if err := set.Register(a.results, a.cacheFull); err != nil {
		return nil, err
	}
	return a, nil
}

// close unregisters the auth's metrics.
func (a *metricsAuth) close() { a.set.Unregister(a.results, a.cacheFull) }

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

// decide returns the cached decision on token for verb on path or asks the
// API server, caching its answer. An error is the API server's failure,
// not cached.
func (a *metricsAuth) decide(ctx context.Context, token, verb, path string) (authDecision, error) {
	h := sha256.New()
	for _, s := range []string{token, verb, path} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	now := metricsAuthClock.Now()
	a.mu.Lock()
	e, ok := a.cache[key]
	a.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.decision, nil
	}
	ctx, cancel := context.WithTimeout(ctx, metricsAuthTimeout)
	defer cancel()
	d, err := a.review(ctx, token, verb, path)
	if err != nil {
		return 0, err
	}
	ttl := metricsAuthDenyTTL
	if d == authAllowed {
		ttl = metricsAuthAllowTTL
	}
	a.store(key, authEntry{decision: d, expires: metricsAuthClock.Now().Add(ttl)})
	return d, nil
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

// store caches e under key, dropping expired entries when the cache is
// full; with none expired, e is not kept and the miss counted.
func (a *metricsAuth) store(key [sha256.Size]byte, e authEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.cache[key]; !ok && len(a.cache) >= a.maxEntries {
		now := metricsAuthClock.Now()
		for k, old := range a.cache {
			if !now.Before(old.expires) {
				delete(a.cache, k)
			}
		}
		if len(a.cache) >= a.maxEntries {
			a.cacheFull.Inc()
			return
		}
	}
	a.cache[key] = e
}
