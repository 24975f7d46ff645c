package k8s

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/telemetry"
)

// What discovery works around is visible as metrics: the endpoint count,
// Ready pods with a malformed port annotation, an unknown role label or
// model names left out, or a status.podIP that is no IP address (left
// out), endpoints over maxEndpoints, and sets the sink refused. Two
// Discoveries share a registry with constant labels apart, and Close
// unregisters.
func TestDiscoveryMetrics(t *testing.T) {
	defer leakcheck.Check(t)()
	vllm := map[string]string{"app": "vllm"}
	badPort := pod("a", "10.0.0.1", vllm, true)
	badPort.Annotations = map[string]string{DefaultEventsPortAnnotation: "70000"}
	badRole := pod("b", "10.0.0.2", map[string]string{"app": "vllm", "llm-d.ai/role": "teacher"}, true)
	badModels := pod("c", "10.0.0.3", vllm, true)
	badModels.Annotations = map[string]string{models.DefaultLabel: "ok,\x01"}
	// The API server checks status.podIP; a fake one (or a broken proxy)
	// need not: the pod is left out, not made an endpoint ID of a megabyte.
	badIP := pod("e", strings.Repeat("h", 1<<20), vllm, true)
	reg := prometheus.NewRegistry()
	set := telemetry.Set{Registerer: reg}
	var refuse atomic.Bool
	refuse.Store(true)
	rec := &recorder{}
	sink := func(eps []kvroute.Endpoint) error {
		if refuse.Load() {
			return errors.New("refused")
		}
		return rec.sink(eps)
	}
	f := newFixtureWithOptions(t, Config{Pool: "pool", MaxEndpoints: 2}, []*corev1.Pod{badPort, badRole, badModels, badIP},
		sink, Options{Set: set.With(prometheus.Labels{"discovery": "pool"})}, poolObj(PoolV1, "pool", v1Spec(8000)))
	defer f.d.Close()
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(f.d.met.sinkErrors) >= 1
	}, wait, 5*time.Millisecond)

	// A second Discovery on the same registry, its labels apart.
	g := newFixtureWithOptions(t, Config{Selector: "app=none", TargetPorts: []int32{8000}}, nil, nil,
		Options{Set: set.With(prometheus.Labels{"discovery": "render"})})
	defer g.d.Close()

	refuse.Store(false)
	_, err := f.kube.CoreV1().Pods(ns).Create(context.Background(), pod("d", "10.0.0.4", vllm, false), metav1.CreateOptions{})
	require.NoError(t, err) // any change recomputes
	require.Eventually(t, func() bool { return len(rec.ids()) == 2 }, wait, 5*time.Millisecond)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kvroute_k8s_discovery_endpoints Endpoints in the set discovery last computed.
# TYPE kvroute_k8s_discovery_endpoints gauge
kvroute_k8s_discovery_endpoints{discovery="pool"} 2
kvroute_k8s_discovery_endpoints{discovery="render"} 0
# HELP kvroute_k8s_discovery_endpoints_left_out Endpoints of Ready pods left out of the set because it is over maxEndpoints (the endpoints of the pods left out whole).
# TYPE kvroute_k8s_discovery_endpoints_left_out gauge
kvroute_k8s_discovery_endpoints_left_out{discovery="pool"} 1
kvroute_k8s_discovery_endpoints_left_out{discovery="render"} 0
# HELP kvroute_k8s_discovery_pods_left_out Ready pods left out of the set, whole, because their endpoints would put it over maxEndpoints.
# TYPE kvroute_k8s_discovery_pods_left_out gauge
kvroute_k8s_discovery_pods_left_out{discovery="pool"} 1
kvroute_k8s_discovery_pods_left_out{discovery="render"} 0
# HELP kvroute_k8s_discovery_pod_problems Ready pods of the set whose labels or annotations discovery works around, by reason: bad_port_annotation (the configured port applies), unknown_role (serves both roles), bad_models_annotation (names left out), bad_pod_ip (status.podIP is no IP address: the pod is left out), bad_active_ports (active-ports annotation entries that are no target port are left out, or an annotation that lists no port leaves the pod out), duplicate_address (an endpoint ID, IP:port, that a pod created earlier already has, as two hostNetwork pods on one node serving one port would: the pod is left out as not ready).
# TYPE kvroute_k8s_discovery_pod_problems gauge
kvroute_k8s_discovery_pod_problems{discovery="pool",reason="bad_active_ports"} 0
kvroute_k8s_discovery_pod_problems{discovery="pool",reason="bad_models_annotation"} 1
kvroute_k8s_discovery_pod_problems{discovery="pool",reason="bad_pod_ip"} 1
kvroute_k8s_discovery_pod_problems{discovery="pool",reason="bad_port_annotation"} 1
kvroute_k8s_discovery_pod_problems{discovery="pool",reason="duplicate_address"} 0
kvroute_k8s_discovery_pod_problems{discovery="pool",reason="unknown_role"} 1
kvroute_k8s_discovery_pod_problems{discovery="render",reason="bad_active_ports"} 0
kvroute_k8s_discovery_pod_problems{discovery="render",reason="bad_models_annotation"} 0
kvroute_k8s_discovery_pod_problems{discovery="render",reason="bad_pod_ip"} 0
kvroute_k8s_discovery_pod_problems{discovery="render",reason="bad_port_annotation"} 0
kvroute_k8s_discovery_pod_problems{discovery="render",reason="duplicate_address"} 0
kvroute_k8s_discovery_pod_problems{discovery="render",reason="unknown_role"} 0
`), "kvroute_k8s_discovery_endpoints", "kvroute_k8s_discovery_endpoints_left_out", "kvroute_k8s_discovery_pods_left_out", "kvroute_k8s_discovery_pod_problems"))
	require.Zero(t, testutil.ToFloat64(f.d.met.poolUnusable))
	for _, id := range rec.ids() {
		require.Less(t, len(id), 64, "no endpoint of the pod with a malformed IP")
	}

	f.d.Close()
	g.d.Close()
	var n int
	n, err = testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Zero(t, n, "Close unregisters")
}

// kvroute_k8s_discovery_endpoints is the size of the set discovery last
// computed, set at every recompute like the other gauges, also when the
// Sink returns an error for it: Router.SetEndpoints applies the set and
// then reports the subscriptions it could not ensure (engines whose event
// port is not up yet), so the router routes over that set meanwhile.
func TestEndpointsGaugeIsSetWhenTheSinkFails(t *testing.T) {
	defer leakcheck.Check(t)()
	vllm := map[string]string{"app": "vllm"}
	sink := func([]kvroute.Endpoint) error { return errors.New("subscription failed") }
	f := newFixtureWithOptions(t, Config{Selector: "app=vllm", TargetPorts: []int32{8000, 8001}},
		[]*corev1.Pod{pod("a", "10.0.0.1", vllm, true)}, sink, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry()}})
	defer f.d.Close()
	require.Eventually(t, func() bool { return testutil.ToFloat64(f.d.met.sinkErrors) >= 1 }, wait, 5*time.Millisecond)
	require.Equal(t, float64(2), testutil.ToFloat64(f.d.met.endpoints))
}
