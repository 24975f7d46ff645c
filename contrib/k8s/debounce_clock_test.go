package k8s

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// The debounce runs on the Options' clock: a change is gathered until a
// manual clock passes Debounce, then the endpoint set is recomputed.
func TestDebounceRunsOnTheOptionsClock(t *testing.T) {
	defer leakcheck.Check(t)()
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	vllm := map[string]string{"app": "vllm"}
	f := newFixtureWithOptions(t, Config{Selector: "app=vllm", TargetPorts: []int32{8000}, Debounce: time.Minute},
		[]*corev1.Pod{pod("a", "10.0.0.1", vllm, true)}, nil, Options{Set: telemetry.Set{Clock: clk}})
	defer f.d.Close()
	f.eventually(t, "10.0.0.1:8000") // Start computes the first set at once
	calls := f.d.SinkCalls()

	f.updatePod(t, pod("a", "10.0.0.1", map[string]string{"app": "vllm", "marker": "1"}, true))
	require.Eventually(t, func() bool { return clk.Waiters() == 1 }, wait, time.Millisecond, "the debounce is armed")
	clk.Advance(time.Minute - time.Millisecond)
	require.Equal(t, calls, f.d.SinkCalls(), "nothing recomputed before the debounce")
	clk.Advance(time.Millisecond)
	require.Eventually(t, func() bool {
		eps := f.d.Endpoints()
		return len(eps) == 1 && eps[0].Labels["marker"] == "1"
	}, wait, time.Millisecond, "recomputed once the debounce passed")
}
