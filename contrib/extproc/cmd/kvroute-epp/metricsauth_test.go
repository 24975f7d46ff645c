package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// fakeAPIServer answers TokenReviews and SubjectAccessReviews as a
// Kubernetes API server would: the token "scraper" is the user
// system:serviceaccount:monitoring:prometheus, allowed get on /metrics and
// /debug/pprof/*, and so is any token starting "scraper-"; "stranger" is a
// user allowed nothing; any other token is not authenticated. With fail
// set it answers 500; with hang it answers nothing until the request is
// given up or release is called, and sends each request held on hung.
type fakeAPIServer struct {
	fail, hang      atomic.Bool
	pause           atomic.Pointer[chan struct{}] // set: each request waits until it is closed, then is answered
	tokens, access  atomic.Int64                  // reviews asked
	hung            chan struct{}
	closeOnce       sync.Once
	released        chan struct{}
	srv             *http.Server
	served          chan error
	url             string
	lastUser        atomic.Value
	lastPathAndVerb atomic.Value
}

func newFakeAPIServer(t *testing.T) *fakeAPIServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := &fakeAPIServer{hung: make(chan struct{}, 64), released: make(chan struct{}), served: make(chan error, 1), url: "http://" + ln.Addr().String()}
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serveHTTP), ReadHeaderTimeout: time.Minute}
	go func() { a.served <- a.srv.Serve(ln) }()
	t.Cleanup(func() {
		a.release()
		require.NoError(t, a.srv.Close())
		<-a.served
	})
	return a
}

// release answers the requests held by hang, and those to come, with
// nothing.
func (a *fakeAPIServer) release() { a.closeOnce.Do(func() { close(a.released) }) }

func (a *fakeAPIServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if p := a.pause.Load(); p != nil {
		a.hung <- struct{}{}
		select {
		case <-r.Context().Done():
			return
		case <-*p:
		}
	}
	if a.hang.Load() {
		select {
		case a.hung <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-a.released:
		}
		return
	}
	if a.fail.Load() {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/apis/authentication.k8s.io/v1/tokenreviews":
		a.tokens.Add(1)
		var tr authnv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch {
		case tr.Spec.Token == "scraper" || strings.HasPrefix(tr.Spec.Token, "scraper-"):
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{
				Username: "system:serviceaccount:monitoring:prometheus", Groups: []string{"system:serviceaccounts"}}}
		case tr.Spec.Token == "stranger":
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "stranger"}}
		}
		tr.Kind, tr.APIVersion = "TokenReview", "authentication.k8s.io/v1"
		_ = json.NewEncoder(w).Encode(tr)
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		a.access.Add(1)
		var sar authzv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil || sar.Spec.NonResourceAttributes == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		nr := sar.Spec.NonResourceAttributes
		a.lastUser.Store(sar.Spec.User)
		a.lastPathAndVerb.Store(nr.Verb + " " + nr.Path)
		sar.Status.Allowed = sar.Spec.User == "system:serviceaccount:monitoring:prometheus" && nr.Verb == "get" &&
			(nr.Path == "/metrics" || strings.HasPrefix(nr.Path, "/debug/pprof/"))
		sar.Kind, sar.APIVersion = "SubjectAccessReview", "authorization.k8s.io/v1"
		_ = json.NewEncoder(w).Encode(sar)
	default:
		http.NotFound(w, r)
	}
}

// kube is a client of the fake API server, without client-go's
// client-side rate limit (5 requests a second), which would pace the tests
// that review many tokens by the wall clock.
func (a *fakeAPIServer) kube(t *testing.T) kubernetes.Interface {
	t.Helper()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: a.url, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"}})
	require.NoError(t, err)
	return kube
}

// wallReviewRate is --metrics-auth-review-rate in the tests on the wall
// clock that are not about it: high enough that no review of theirs is
// refused, however slowly they run.
const wallReviewRate = 1e6

// serveAuthMetrics serves a metrics port with m's setting on loopback
// until the test ends and returns its URL.
func serveAuthMetrics(t *testing.T, m *metricsServing) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "kvroute_up 1\n") })
	mux.HandleFunc(extproc.ReadyPath, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ready\n") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ms, ln := m.serve(mux, ln)
	served := make(chan error, 1)
	go func() { served <- ms.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, ms.Close())
		require.ErrorIs(t, <-served, http.ErrServerClosed)
	})
	return m.scheme() + "://" + ln.Addr().String()
}

// get asks url with the bearer token (none when empty) and returns the
// status code.
func get(t *testing.T, c *http.Client, url, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode
}

// With --metrics-endpoint-auth each caller of /metrics (and pprof) needs a
// token the API server authenticates and a SubjectAccessReview allowing
// get on the path: 401 without one or with one the API server refuses,
// 403 when not allowed, 200 when allowed; /ready, the kubelet's probe,
// stays open.
func TestMetricsEndpointAuth(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	api := newFakeAPIServer(t)
	reg := prometheus.NewRegistry()
	auth, err := newMetricsAuth(api.kube(t), metricsAuthConfig{reviewRate: wallReviewRate}, telemetry.Set{Registerer: reg})
	require.NoError(t, err)
	url := serveAuthMetrics(t, &metricsServing{auth: auth, pprof: true})
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()

	require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/metrics", ""))
	require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/metrics", "forged"))
	require.Equal(t, http.StatusForbidden, get(t, c, url+"/metrics", "stranger"))
	require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper"))
	require.Equal(t, "system:serviceaccount:monitoring:prometheus", api.lastUser.Load())
	require.Equal(t, "get /metrics", api.lastPathAndVerb.Load())
	require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/debug/pprof/", ""))
	require.Equal(t, http.StatusOK, get(t, c, url+"/debug/pprof/", "scraper"))
	require.Equal(t, http.StatusForbidden, get(t, c, url+extproc.StatusPath, "scraper"), "the status page needs its own grant")
	require.Equal(t, http.StatusOK, get(t, c, url+extproc.ReadyPath, ""))
	require.Equal(t, http.StatusUnauthorized, get(t, c, url+"/metrics", strings.Repeat("x", maxBearerTokenBytes+1)))

	require.Equal(t, 2.0, testutil.ToFloat64(auth.results.WithLabelValues("allowed")))
	require.Equal(t, 2.0, testutil.ToFloat64(auth.results.WithLabelValues("forbidden")))
	require.Equal(t, 4.0, testutil.ToFloat64(auth.results.WithLabelValues("unauthenticated")))
	require.Equal(t, 0.0, testutil.ToFloat64(auth.results.WithLabelValues("error")))
}

// A failing API server answers 503, and one that does not answer is given
// up after metricsAuthTimeout with 503 too: the scrape does not hang. A
// failure is not cached.
func TestMetricsEndpointAuthAPIServerFailure(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	api := newFakeAPIServer(t)
	auth, err := newMetricsAuth(api.kube(t), metricsAuthConfig{reviewRate: wallReviewRate}, telemetry.Set{Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	url := serveAuthMetrics(t, &metricsServing{auth: auth})
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()

	api.fail.Store(true)
	require.Equal(t, http.StatusServiceUnavailable, get(t, c, url+"/metrics", "scraper"))
	api.fail.Store(false)
	require.Equal(t, http.StatusOK, get(t, c, url+"/metrics", "scraper"))

	old := metricsAuthTimeout
	metricsAuthTimeout = 50 * time.Millisecond
	t.Cleanup(func() { metricsAuthTimeout = old })
	api.hang.Store(true)
	require.Equal(t, http.StatusServiceUnavailable, get(t, c, url+"/metrics", "stranger"))
	require.Equal(t, 2.0, testutil.ToFloat64(auth.results.WithLabelValues("error")))
}
