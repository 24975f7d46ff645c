package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/contrib/k8s"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/syncbuf"
)

// fakeCluster replaces kubeClients, until the test ends, with fake clients
// of a cluster holding the InferencePool pool in namespace ns, selecting one
// Ready pod at 127.0.0.1:8000, and answering TokenReviews and
// SubjectAccessReviews as fakeAPIServer does: "scraper" may get /metrics.
func fakeCluster(t *testing.T, ns, pool string) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "vllm-0", Namespace: ns, Labels: map[string]string{"app": "vllm"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	ip := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": k8s.PoolV1.GroupVersion().String(), "kind": "InferencePool",
		"metadata": map[string]any{"name": pool, "namespace": ns},
		"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "vllm"}},
			"targetPorts": []any{map[string]any{"number": int64(8000)}}, "endpointPickerRef": map[string]any{"name": "epp"}},
	}}
	var mu sync.Mutex
	old := kubeClients
	kubeClients = func(string, clientLimits) (kubernetes.Interface, dynamic.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		kube := fake.NewClientset(p)
		kube.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
			tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
			if tr.Spec.Token == "scraper" {
				tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "prometheus"}}
			}
			return true, tr, nil
		})
		kube.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
			sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
			nr := sar.Spec.NonResourceAttributes
			sar.Status.Allowed = sar.Spec.User == "prometheus" && nr != nil && nr.Path == "/metrics" && nr.Verb == "get"
			return true, sar, nil
		})
		dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
			k8s.PoolV1: "InferencePoolList", k8s.PoolV1Alpha2: "InferencePoolList",
		}, ip.DeepCopy())
		return kube, dyn, nil
	}
	t.Cleanup(func() { kubeClients = old })
}

// llmdChartArgs are the epp container's args llm-d's router chart renders
// (config/charts/routerlib/templates/_deployment.yaml) for an InferencePool
// release with two replicas, tracing off, and the given extra args (the
// Prometheus auth switch), then the loopback ports of the test.
func llmdChartArgs(configFile string, extra ...string) []string {
	args := []string{"--pool-name", "qwen", "--pool-namespace", "llm", "--pool-group", "inference.networking.k8s.io",
		"--zap-encoder", "json", "--config-file", configFile, "--ha-enable-leader-election",
		"--grpc-health-port", "9003", "--tracing=false"}
	args = append(args, extra...)
	return append(args, "--listen-host", "127.0.0.1", "--grpc-port", "0", "--grpc-health-port", "0", "--metrics-port", "0",
		"--drain-timeout=0")
}

// startLLMD runs kvroute-epp with args, without startEPP's defaults, and
// returns the addresses it prints; it is stopped when the test ends.
func startLLMD(t *testing.T, args []string) (m []string, stderr *syncbuf.Buffer) {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	stderr = &syncbuf.Buffer{}
	go func() {
		done <- run(ctx, args, pw, stderr)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	var line []byte
	b := make([]byte, 1)
	for {
		_, err := pr.Read(b)
		require.NoError(t, err, stderr.String())
		if b[0] == '\n' {
			break
		}
		line = append(line, b[0])
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	fields := strings.Fields(string(line))
	for i, w := range fields {
		if w == "on" && i+1 < len(fields) {
			m = append(m, strings.TrimSuffix(fields[i+1], ","))
		}
	}
	require.Len(t, m, 3, string(line))
	return m, stderr
}

// waitDiscovered waits until the /ready page of the metrics URL shows
// fakeCluster's pod: discovery has synced.
func waitDiscovered(t *testing.T, c *http.Client, metricsURL string) {
	t.Helper()
	readyURL := strings.TrimSuffix(metricsURL, "/metrics") + extproc.ReadyPath
	require.Eventually(t, func() bool {
		resp, err := c.Get(readyURL)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return strings.Contains(string(body), `"id":"127.0.0.1:8000"`)
	}, 20*time.Second, 10*time.Millisecond)
}

// kvroute-epp starts with exactly the args llm-d's router chart renders for
// an InferencePool, with the chart's Prometheus auth on (no flag: llm-d's
// default, metrics behind a Kubernetes token) and off
// (--metrics-endpoint-auth=false), and serves: ext_proc over TLS (the
// chart's default --secure-serving), liveness on the health port, metrics
// as asked and /ready open to the kubelet. The ignored flags are logged
// once each, as JSON lines (--zap-encoder json).
func TestLLMDRouterChartArgsPoolMode(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	fakeCluster(t, "llm", "qwen")
	configFile := guidePickerConfig(t)
	for _, authOn := range []bool{true, false} {
		t.Run(fmt.Sprintf("auth=%v", authOn), func(t *testing.T) { chartArgsPoolMode(t, configFile, authOn) })
	}
}

// chartArgsPoolMode is one run of TestLLMDRouterChartArgsPoolMode, stopped
// when its subtest ends (so that the next run's elector finds the Lease
// released).
func chartArgsPoolMode(t *testing.T, configFile string, authOn bool) {
	{
		var extra []string
		if !authOn {
			extra = []string{"--metrics-endpoint-auth=false"}
		}
		m, stderr := startLLMD(t, llmdChartArgs(configFile, extra...))
		require.True(t, strings.HasPrefix(m[2], "http://"), m[2])

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		hconn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		defer hconn.Close()
		resp, err := healthpb.NewHealthClient(hconn).Check(ctx, &healthpb.HealthCheckRequest{Service: extproc.LivenessService})
		require.NoError(t, err)
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())

		xconn, err := grpc.NewClient(m[0], grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))) //nolint:gosec // self-signed
		require.NoError(t, err)
		_, err = healthpb.NewHealthClient(xconn).Check(ctx, &healthpb.HealthCheckRequest{Service: extproc.ExtProcService})
		require.NoError(t, err, "ext_proc over TLS")
		require.NoError(t, xconn.Close())

		c := &http.Client{Transport: &http.Transport{}}
		metricsURL := strings.TrimSuffix(m[2], "/metrics") + "/metrics"
		if authOn {
			require.Equal(t, http.StatusUnauthorized, get(t, c, metricsURL, ""))
			require.Equal(t, http.StatusForbidden, get(t, c, strings.TrimSuffix(metricsURL, "/metrics")+extproc.StatusPath, "scraper"))
		}
		require.Equal(t, http.StatusOK, get(t, c, metricsURL, "scraper"))
		waitDiscovered(t, c, m[2]) // /ready needs no token
		// The chart's one-replica probes ask the health port for this service.
		resp, err = healthpb.NewHealthClient(hconn).Check(ctx, &healthpb.HealthCheckRequest{Service: extproc.PoolSyncedService})
		require.NoError(t, err)
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
		c.CloseIdleConnections()

		// --ha-enable-leader-election is honoured and --tracing=false asks
		// for what kvroute-epp does: neither is logged as ignored.
		require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "leader election: holding the Lease") },
			20*time.Second, 10*time.Millisecond, stderr.String())
		logs := stderr.String()
		for _, name := range []string{"ha-enable-leader-election", "tracing"} {
			require.Zero(t, strings.Count(logs, `"flag":"--`+name+`"`), logs)
		}
	}
}
