package k8s

import (
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// An active-ports annotation that is present but lists no port (empty, or
// separators only) leaves the pod no endpoint, as llm-d's picker reads it
// (an empty set of active ports), and, as any other active-ports problem,
// is warned of once per value and counted in
// kvroute_k8s_discovery_pod_problems{reason="bad_active_ports"}: it used to
// leave the pod out without a trace.
func TestEmptyActivePortsAnnotationIsAProblem(t *testing.T) {
	defer leakcheck.Check(t)()
	logs := &logRecorder{msg: "k8s: active-ports annotation lists no port: the pod gets no endpoint"}
	vllm := map[string]string{"app": "vllm"}
	a := pod("a", "10.0.0.1", vllm, true)
	a.Annotations = map[string]string{"llm-d.ai/active-ports": ""}
	b := pod("b", "10.0.0.2", vllm, true)
	f := newFixtureWithOptions(t, Config{Pool: "pool"}, []*corev1.Pod{a, b}, nil,
		Options{Set: telemetry.Set{Logger: slog.New(logs)}}, poolObj(PoolV1, "pool", v1Spec(8000, 8001)))
	defer f.d.Close()
	f.eventually(t, "10.0.0.2:8000", "10.0.0.2:8001")
	require.Equal(t, float64(1), testutil.ToFloat64(f.d.met.problems[problemActivePorts]))
	require.Equal(t, []string{ns + "/a"}, logs.values())

	a.Annotations["llm-d.ai/active-ports"] = " , "
	f.updatePod(t, a)
	b.Labels = map[string]string{"app": "vllm", "n": "1"} // a recompute that shows a's new value has been seen
	f.updatePod(t, b)
	f.eventuallyLabel(t, "10.0.0.2:8000", "n", "1")
	require.Equal(t, float64(1), testutil.ToFloat64(f.d.met.problems[problemActivePorts]))
	require.Equal(t, []string{ns + "/a", ns + "/a"}, logs.values(), "a new value is warned of, once")

	a.Annotations["llm-d.ai/active-ports"] = "8001"
	f.updatePod(t, a)
	f.eventually(t, "10.0.0.1:8001", "10.0.0.2:8000", "10.0.0.2:8001")
	require.Zero(t, testutil.ToFloat64(f.d.met.problems[problemActivePorts]))
}
