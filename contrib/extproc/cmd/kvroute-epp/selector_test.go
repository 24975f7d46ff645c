package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/contrib/k8s"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
)

// fakeKube makes run's Kubernetes clients kube (a client-go fake
// clientset) and no dynamic client, until the test ends.
func fakeKube(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	prev := kubeClients
	kubeClients = func(string, clientLimits) (kubernetes.Interface, dynamic.Interface, error) { return kube, nil, nil }
	t.Cleanup(func() { kubeClients = prev })
}

// readyPod is a running, Ready pod of namespace ns.
func readyPod(ns, name, ip string, lbl map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// readyReason returns the status and reason of the picker's /ready, whose
// metrics URL is metricsURL.
func readyReason(t *testing.T, client *http.Client, metricsURL string) (int, string) {
	t.Helper()
	resp, err := client.Get(strings.TrimSuffix(metricsURL, "/metrics") + extproc.ReadyPath)
	require.NoError(t, err)
	defer resp.Body.Close()
	var r struct {
		Reason string `json:"reason"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	return resp.StatusCode, r.Reason
}

// readyEndpoints returns the endpoint IDs the picker's /ready lists, and
// whether it is ready.
func readyEndpoints(t *testing.T, client *http.Client, metricsURL string) ([]string, bool) {
	t.Helper()
	resp, err := client.Get(strings.TrimSuffix(metricsURL, "/metrics") + extproc.ReadyPath)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var r struct {
		Ready     bool `json:"ready"`
		Endpoints []struct {
			ID string `json:"id"`
		} `json:"endpoints"`
	}
	require.NoError(t, json.Unmarshal(b, &r), string(b))
	var ids []string
	for _, e := range r.Endpoints {
		ids = append(ids, e.ID)
	}
	return ids, r.Ready
}

// --endpoint-selector with --endpoint-target-ports is the llm-d router
// picker's standalone pool: the pods of --pool-namespace the selector
// matches, on each target port, are the picker's endpoints; a pod it does
// not match, or of another namespace, is not.
func TestRunFollowsEndpointSelector(t *testing.T) {
	defer leakcheck.Check(t)()
	fakeKube(t, fake.NewClientset(
		readyPod("llm", "vllm-0", "127.0.0.1", map[string]string{"app": "vllm", "tier": "decode"}),
		readyPod("llm", "other-0", "127.0.0.2", map[string]string{"app": "other"}),
		readyPod("elsewhere", "vllm-1", "127.0.0.3", map[string]string{"app": "vllm", "tier": "decode"}),
	))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The engines publish no KV events (nothing listens on the ports): the
	// router lists each endpoint it subscribed to, connecting.
	cfg := fmt.Sprintf("model: %s\nblockSize: 16\nevents:\n  eventsPort: %d\n  replayPort: %d\n", model, testport.Port(t), testport.Port(t))
	m, done := startEPP(t, ctx, "--endpoint-selector", "app=vllm,tier in (decode)", "--endpoint-target-ports", "8000,8001,8000",
		"--pool-namespace", "llm", "--config-text", cfg)

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	want := []string{"127.0.0.1:8000", "127.0.0.1:8001"}
	require.Eventually(t, func() bool {
		ids, _ := readyEndpoints(t, client, m[3])
		return slices.Equal(ids, want)
	}, 20*time.Second, 10*time.Millisecond, "the matching pod on each target port, and nothing else")

	cancel()
	require.NoError(t, <-done)
}

// --endpoint-selector replaces --pool-name and --endpoints, as llm-d's
// picker refuses both pool flags together; it needs 1 to 8 target ports,
// and its selector and ports are checked at start. Only with it are the
// ports honoured rather than logged as ignored.
func TestEndpointSelectorFlags(t *testing.T) {
	f, err := parseFlags([]string{"--endpoint-selector", "app=vllm", "--endpoint-target-ports", "8000", "--endpoint-target-ports", "8001,8000"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []int32{8000, 8001}, f.targetPorts)
	require.Empty(t, f.ignored, "the ports are honoured")
	cfg, ok := poolDiscovery(f)
	require.True(t, ok)
	require.Equal(t, "app=vllm", cfg.Selector)
	require.Equal(t, []int32{8000, 8001}, cfg.TargetPorts)
	require.Empty(t, cfg.Pool)

	f, err = parseFlags([]string{"--pool-name", "p", "--endpoint-target-ports", "8000"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"endpoint-target-ports"}, f.ignored, "with --pool-name the InferencePool's ports are used")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--endpoint-selector", "app=vllm", "--endpoint-target-ports", "8000", "--pool-name", "p"}, "--pool-name"},
		{[]string{"--endpoint-selector", "app=vllm", "--endpoint-target-ports", "8000", "--endpoints", "10.0.0.1:8000"}, "--endpoints"},
		{[]string{"--endpoint-selector", "app=vllm"}, "--endpoint-target-ports with 1 to 8 ports, not 0"},
		{[]string{"--endpoint-selector", "app=vllm", "--endpoint-target-ports", "1,2,3,4,5,6,7,8,9"}, "not 9"},
		{[]string{"--endpoint-selector", "app in (", "--endpoint-target-ports", "8000"}, "--endpoint-selector"},
		{nil, "set exactly one of --pool-name, --endpoint-selector and --endpoints"},
	} {
		_, err := parseFlags(c.args, io.Discard)
		require.ErrorContains(t, err, c.want, c.args)
	}
}

// Without --pool-namespace the pool's namespace is $POD_NAMESPACE, as
// kvroute's manifests set it, else $NAMESPACE, as llm-d's router chart sets
// it (passing no --pool-namespace with --endpoint-selector), else default;
// an empty --pool-namespace is none given.
func TestPoolNamespaceDefault(t *testing.T) {
	args := []string{"--endpoint-selector", "app=vllm", "--endpoint-target-ports", "8000"}
	for _, c := range []struct{ podNS, ns, want string }{
		{"", "", "default"},
		{"", "llm", "llm"},
		{"kv", "llm", "kv"},
	} {
		t.Setenv("POD_NAMESPACE", c.podNS)
		t.Setenv("NAMESPACE", c.ns)
		f, err := parseFlags(args, io.Discard)
		require.NoError(t, err)
		require.Equal(t, c.want, f.poolNamespace, c)
		f, err = parseFlags(append(args, "--pool-namespace", ""), io.Discard)
		require.NoError(t, err)
		require.Equal(t, c.want, f.poolNamespace, "an empty --pool-namespace is no namespace given: %v", c)
		f, err = parseFlags(append(args, "--pool-namespace", "given"), io.Discard)
		require.NoError(t, err)
		require.Equal(t, "given", f.poolNamespace)
	}
}

// A cluster without the InferencePool CRD does not keep the picker
// waiting with no reason: it serves, not ready, and /ready says which CRD
// is not installed.
func TestRunWithoutInferencePoolCRDSaysSo(t *testing.T) {
	defer leakcheck.Check(t)()
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		k8s.PoolV1: "InferencePoolList",
	})
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: k8s.PoolV1.Group, Resource: k8s.PoolV1.Resource}, "")
	dyn.PrependReactor("list", "inferencepools", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, notFound })
	dyn.PrependWatchReactor("inferencepools", func(k8stesting.Action) (bool, watch.Interface, error) { return true, nil, notFound })
	prev := kubeClients
	kubeClients = func(string, clientLimits) (kubernetes.Interface, dynamic.Interface, error) {
		return fake.NewClientset(readyPod("llm", "vllm-0", "127.0.0.1", map[string]string{"app": "vllm"})), dyn, nil
	}
	t.Cleanup(func() { kubeClients = prev })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, done := startEPP(t, ctx, "--pool-name", "qwen", "--pool-namespace", "llm", "--config-text", "model: "+model+"\nblockSize: 16\n")

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	require.Eventually(t, func() bool {
		status, reason := readyReason(t, client, m[3])
		return status == http.StatusServiceUnavailable &&
			reason == "no endpoints: k8s: InferencePool CRD inference.networking.k8s.io/v1 not installed"
	}, 20*time.Second, 10*time.Millisecond, "/ready names the missing CRD")

	cancel()
	require.NoError(t, <-done)
}

// A ServiceAccount that may not list the pods leaves discovery waiting for
// its caches: /ready says so, with the API server's refusal, and a stop
// meanwhile is a normal one.
func TestRunWithoutPodListRBACSaysSo(t *testing.T) {
	defer leakcheck.Check(t)()
	kube := fake.NewClientset(readyPod("llm", "vllm-0", "127.0.0.1", map[string]string{"app": "vllm"}))
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "",
		errors.New(`User "system:serviceaccount:llm:kvroute-epp" cannot list resource "pods"`))
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, forbidden })
	prev := kubeClients
	kubeClients = func(string, clientLimits) (kubernetes.Interface, dynamic.Interface, error) { return kube, nil, nil }
	t.Cleanup(func() { kubeClients = prev })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, done := startEPP(t, ctx, "--endpoint-selector", "app=vllm", "--endpoint-target-ports", "8000",
		"--pool-namespace", "llm", "--config-text", "model: "+model+"\nblockSize: 16\n")

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	require.Eventually(t, func() bool {
		status, reason := readyReason(t, client, m[3])
		return status == http.StatusServiceUnavailable &&
			strings.HasPrefix(reason, "no endpoints: endpoint discovery has not synced: k8s: listing or watching pods: ") &&
			strings.Contains(reason, "forbidden")
	}, 20*time.Second, 10*time.Millisecond, "/ready names the refused list")

	// Stopped (SIGTERM) while discovery still waits: a normal stop, which
	// exits 0 as a stop after the sync does.
	cancel()
	require.NoError(t, <-done)
}
