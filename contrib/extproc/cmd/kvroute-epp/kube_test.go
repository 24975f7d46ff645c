package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// The reviews' client lets through what the review bucket starts, two
// requests a review, at its rate and at once: client-go's default (5
// requests a second) would queue the reviews of a rate above 2.5.
func TestReviewClientLimitsCoverTheReviewRate(t *testing.T) {
	for rate, want := range map[float64]clientLimits{
		defaultMetricsAuthReviewRate: {qps: 4, burst: 8},
		0.5:                          {qps: 1, burst: 2},
		10:                           {qps: 20, burst: 40},
		0.01:                         {qps: 0.02, burst: 2}, // a bucket holds one review at least
	} {
		got := reviewClientLimits(rate)
		require.Equal(t, want, got, "rate %v", rate)
		require.GreaterOrEqual(t, float64(got.burst), requestsPerReview*newReviewBucket(rate, metricsAuthClock.Now()).burst)
	}
}

// kubeconfigFile writes a kubeconfig naming a loopback API server (never
// dialled: building a client does not connect) and returns its path.
func kubeconfigFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(p, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	return p
}

// The client restClients builds with limits has them, one bucket shared by
// the TokenReviews' and SubjectAccessReviews' API groups; without limits
// (discovery's client) each group keeps client-go's default.
func TestRestClientsTakeTheLimits(t *testing.T) {
	path := kubeconfigFile(t)
	kube, _, err := restClients(path, reviewClientLimits(0.01))
	require.NoError(t, err)
	cs := kube.(*kubernetes.Clientset)
	authn := cs.AuthenticationV1().RESTClient().GetRateLimiter()
	authz := cs.AuthorizationV1().RESTClient().GetRateLimiter()
	require.True(t, authn == authz, "the reviews' two requests share one limit")
	require.InDelta(t, 0.02, authn.QPS(), 1e-6)
	// Two requests at once (one review, the bucket's burst), then none
	// for 50 s at 0.02 a second: the third is refused whenever it comes.
	require.True(t, authn.TryAccept())
	require.True(t, authz.TryAccept())
	require.False(t, authn.TryAccept(), "a burst of two requests")

	kube, _, err = restClients(path, clientLimits{})
	require.NoError(t, err)
	cs = kube.(*kubernetes.Clientset)
	authn = cs.AuthenticationV1().RESTClient().GetRateLimiter()
	require.False(t, authn == cs.AuthorizationV1().RESTClient().GetRateLimiter())
	require.InDelta(t, 5, authn.QPS(), 1e-6, "client-go's default")
}

// --metrics-endpoint-auth asks kubeClients for the reviews' client with
// the limits of --metrics-auth-review-rate (or its default).
func TestMetricsAuthClientIsLimitedToTheReviewRate(t *testing.T) {
	defer leakcheck.Check(t)()
	prev := kubeClients
	t.Cleanup(func() { kubeClients = prev })
	var asked []clientLimits
	kubeClients = func(_ string, l clientLimits) (kubernetes.Interface, dynamic.Interface, error) {
		asked = append(asked, l)
		return kubefake.NewClientset(), nil, nil
	}
	for _, rate := range []float64{0, 3} {
		l := llmdServerFlags{metricsAuth: true, metricsAuthConfig: metricsAuthConfig{reviewRate: rate}}
		m, err := newMetricsServing(&l, "", nil, telemetry.Set{Registerer: prometheus.NewRegistry()})
		require.NoError(t, err)
		m.close()
	}
	require.Equal(t, []clientLimits{{qps: 4, burst: 8}, {qps: 6, burst: 12}}, asked)
}

// Every --metrics-auth-review-rate parseFlags accepts gives the reviews'
// client limits client-go takes, a positive burst covering the bucket's:
// a rate too large for them is refused by the flag, naming it, instead of
// failing kvroute-epp's start with client-go's error about a burst.
func TestEveryAcceptedReviewRateBuildsTheReviewsClient(t *testing.T) {
	path := kubeconfigFile(t)
	for _, rate := range []string{"1e-9", "0.5", "1000", "1e6", "3e18", "1e19", "1e40", "1.7976931348623157e308"} {
		f, err := parseFlags([]string{"--pool-name", "p", "--metrics-auth-review-rate", rate}, io.Discard)
		if err != nil {
			require.ErrorContains(t, err, "--metrics-auth-review-rate", rate)
			continue
		}
		r := f.llmdServer.metricsAuthConfig.reviewRate
		l := reviewClientLimits(r)
		require.Positive(t, l.burst, rate)
		require.GreaterOrEqual(t, float64(l.burst), requestsPerReview*newReviewBucket(r, metricsAuthClock.Now()).burst, rate)
		_, _, err = restClients(path, l)
		require.NoError(t, err, rate)
	}
}

// Leader election shares discovery's client, which is safe only while
// that client has no limits of its own: each API group then has a rate
// limiter apart, and the Lease's group (coordination.k8s.io) is the
// election's alone, so the pods' watches and lists (core) never queue a
// renewal. Limits given to discovery's client would be one bucket shared
// by every group, the renewals among them: the election then needs a
// client of its own, as the reviews have.
func TestElectionHasItsOwnRateLimit(t *testing.T) {
	kube, _, err := restClients(kubeconfigFile(t), discoveryClientLimits)
	require.NoError(t, err)
	cs := kube.(*kubernetes.Clientset)
	lease := cs.CoordinationV1().RESTClient().GetRateLimiter()
	for name, other := range map[string]interface{ QPS() float32 }{
		"core (pods)":        cs.CoreV1().RESTClient().GetRateLimiter(),
		"discovery.k8s.io":   cs.DiscoveryV1().RESTClient().GetRateLimiter(),
		"authentication.k8s": cs.AuthenticationV1().RESTClient().GetRateLimiter(),
	} {
		require.False(t, lease == other, "the Lease's rate limiter is shared with %s", name)
	}
	require.InDelta(t, 5, lease.QPS(), 1e-6, "client-go's default, for a renewal every retry period")
}
