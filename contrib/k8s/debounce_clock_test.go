package k8s

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/kvroute/kvroute"
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

// Any number of events within the debounce interval cause one
// recomputation: the events that came while the debounce ran are covered
// by it, and arm no second debounce once it is done.
func TestBurstWithinTheDebounceRecomputesOnce(t *testing.T) {
	defer leakcheck.Check(t)()
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	vllm := map[string]string{"app": "vllm"}
	// After Start the Sink holds the loop until released, so that the test
	// sees the loop's state while it is in the recompute.
	var hold atomic.Bool
	entered, release := make(chan []kvroute.Endpoint, 1), make(chan struct{})
	sink := func(eps []kvroute.Endpoint) error {
		if hold.Load() {
			entered <- eps
			<-release
		}
		return nil
	}
	f := newFixtureWithOptions(t, Config{Selector: "app=vllm", TargetPorts: []int32{8000}, Debounce: time.Minute},
		[]*corev1.Pod{pod("a", "10.0.0.1", vllm, true)}, sink, Options{Set: telemetry.Set{Clock: clk}})
	defer f.d.Close()
	hold.Store(true)
	require.Zero(t, clk.Waiters())

	f.updatePod(t, pod("a", "10.0.0.1", map[string]string{"app": "vllm", "gen": "1"}, true))
	require.Eventually(t, func() bool { return clk.Waiters() == 1 }, wait, time.Millisecond, "the first event arms the debounce")
	f.updatePod(t, pod("a", "10.0.0.1", map[string]string{"app": "vllm", "gen": "2"}, true))
	require.Eventually(t, func() bool { return len(f.d.kick) == 1 }, wait, time.Millisecond, "the second event, within the interval")
	clk.Advance(time.Minute)
	var eps []kvroute.Endpoint
	select {
	case eps = <-entered:
	case <-time.After(wait):
		t.Fatal("no recompute after the debounce")
	}
	pending := len(f.d.kick) // the loop is in the Sink: nothing reads kick
	close(release)
	require.Equal(t, "2", eps[0].Labels["gen"], "the recompute saw both events")
	require.Zero(t, pending, "an event the recompute covers is left to arm a second debounce")
	require.Zero(t, clk.Waiters(), "a second debounce was armed")
}
