package k8s

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// onWarn is a slog.Handler that runs do at the first warning whose message
// starts with prefix, on the goroutine that logs it.
type onWarn struct {
	prefix string
	do     func()
	done   atomic.Bool
}

func (h *onWarn) Enabled(context.Context, slog.Level) bool { return true }
func (h *onWarn) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *onWarn) WithGroup(string) slog.Handler            { return h }
func (h *onWarn) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) && h.done.CompareAndSwap(false, true) {
		h.do()
	}
	return nil
}

// A Close from another goroutine that returns after the informer caches
// have synced but before Start hands the first endpoint set to the Sink
// leaves the Sink uncalled, and Start reports the Discovery closed. The
// warning of a pod's malformed port annotation, logged while the first set
// is computed, is where Close runs.
func TestCloseBeforeTheFirstSetKeepsTheSinkUncalled(t *testing.T) {
	noLeak := leakcheck.Check(t)
	p := pod("a", "10.0.0.1", map[string]string{"app": "vllm"}, true)
	p.Annotations = map[string]string{DefaultEventsPortAnnotation: "not a port"}
	var d *Discovery
	var calls atomic.Int32
	sink := func([]kvroute.Endpoint) error { calls.Add(1); return nil }
	h := &onWarn{prefix: "k8s: ignoring a malformed port annotation", do: func() {
		closed := make(chan struct{})
		go func() { d.Close(); close(closed) }()
		<-closed
	}}
	d, err := New(Config{Namespace: ns, Selector: "app=vllm", TargetPorts: []int32{8000}}, fake.NewClientset(p), nil, sink,
		Options{Set: telemetry.Set{Logger: slog.New(h)}})
	require.NoError(t, err)
	err = d.Start(context.Background())
	require.True(t, h.done.Load(), "Close ran while the first set was computed")
	require.ErrorIs(t, err, errClosedInStart)
	require.Zero(t, calls.Load(), "the Sink was called after Close returned")
	require.Zero(t, d.SinkCalls())
	require.False(t, d.Synced())
	noLeak()
}

// A Sink that calls Close while the loop hands it a changed endpoint set
// does not wait for itself: Close returns, so does the Sink, and the loop
// ends with no further call.
func TestSinkThatClosesFromTheLoopDoesNotDeadlock(t *testing.T) {
	noLeak := leakcheck.Check(t)
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	vllm := map[string]string{"app": "vllm"}
	var d *Discovery
	var calls atomic.Int32
	closed := make(chan struct{})
	sink := func([]kvroute.Endpoint) error {
		if calls.Add(1) == 2 {
			d.Close()
			close(closed)
		}
		return nil
	}
	f := newFixtureWithOptions(t, Config{Selector: "app=vllm", TargetPorts: []int32{8000}, Debounce: time.Second},
		[]*corev1.Pod{pod("a", "10.0.0.1", vllm, true)}, sink, Options{Set: telemetry.Set{Clock: clk}})
	d = f.d
	require.Equal(t, int32(1), calls.Load())
	f.updatePod(t, pod("a", "10.0.0.1", map[string]string{"app": "vllm", "marker": "1"}, true))
	require.Eventually(t, func() bool { return clk.Waiters() == 1 }, wait, time.Millisecond, "the debounce is armed")
	clk.Advance(time.Second)
	select {
	case <-closed:
	case <-time.After(wait):
		t.Fatal("Close called from the Sink did not return")
	}
	d.Close() // idempotent
	noLeak()  // the loop's goroutine has ended
	require.Equal(t, int32(2), calls.Load())
}
