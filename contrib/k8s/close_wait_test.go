package k8s

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// heldRegistry is a registry whose first Unregister announces itself on
// entered and waits for release: a Close held there is still shutting down.
type heldRegistry struct {
	*prometheus.Registry
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func newHeldRegistry() *heldRegistry {
	return &heldRegistry{Registry: prometheus.NewRegistry(), entered: make(chan struct{}), release: make(chan struct{})}
}

func (r *heldRegistry) Unregister(c prometheus.Collector) bool {
	r.once.Do(func() {
		close(r.entered)
		<-r.release
	})
	return r.Registry.Unregister(c)
}

// waitingClose reports whether a goroutine other than the one held in
// heldRegistry is blocked on a channel inside Discovery.Close.
func waitingClose() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("[chan receive")) && bytes.Contains(g, []byte("k8s.(*Discovery).Close(")) &&
			!bytes.Contains(g, []byte("heldRegistry")) {
			return true
		}
	}
	return false
}

// A second Close returns only once the first has finished shutting down:
// when either returns, discovery's metrics are unregistered, so a new
// Discovery can register on the same registry.
func TestSecondCloseWaitsForTheFirst(t *testing.T) {
	noLeak := leakcheck.Check(t)
	reg := newHeldRegistry()
	f := newFixtureWithOptions(t, Config{Selector: "app=vllm", TargetPorts: []int32{8000}},
		[]*corev1.Pod{pod("a", "10.0.0.1", map[string]string{"app": "vllm"}, true)}, nil,
		Options{Set: telemetry.Set{Registerer: reg}})

	first := make(chan struct{})
	go func() { f.d.Close(); close(first) }()
	<-reg.entered // the first Close is unregistering

	registered := make(chan int, 1) // collectors still registered when the second Close returned
	go func() {
		f.d.Close()
		n, err := testutil.GatherAndCount(reg.Registry)
		if err != nil {
			t.Error(err)
		}
		registered <- n
	}()
	for !waitingClose() {
		select {
		case n := <-registered:
			t.Fatalf("the second Close returned while the first was shutting down (%d series still registered)", n)
		default:
			runtime.Gosched()
		}
	}
	close(reg.release)
	require.Zero(t, <-registered, "the second Close returned before the metrics were unregistered")
	<-first
	noLeak()
}

// A Sink that calls Close while another Close, from another goroutine, is
// still shutting down does not wait for it: the other Close does not wait
// for the Sink either, and the Sink's Close returns at once.
func TestCloseFromTheSinkDuringAnotherCloseDoesNotWait(t *testing.T) {
	noLeak := leakcheck.Check(t)
	reg := newHeldRegistry()
	var d *Discovery
	sinkEntered, sinkClosed := make(chan struct{}), make(chan struct{})
	sink := func([]kvroute.Endpoint) error {
		close(sinkEntered)
		<-reg.entered // the other Close is unregistering
		d.Close()
		close(sinkClosed)
		return nil
	}
	d, err := New(Config{Namespace: ns, Selector: "app=vllm", TargetPorts: []int32{8000}}, fake.NewClientset(), nil, sink,
		Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)

	started := make(chan error, 1)
	go func() { started <- d.Start(context.Background()) }()
	<-sinkEntered
	other := make(chan struct{})
	go func() { d.Close(); close(other) }()
	select {
	case <-sinkClosed:
	case <-time.After(wait):
		t.Fatal("Close called from the Sink waited for the other Close")
	}
	require.ErrorIs(t, <-started, errClosedInStart)
	close(reg.release)
	<-other
	noLeak()
}
