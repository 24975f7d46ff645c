package k8s

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
)

// A Start whose informer caches cannot sync (the API server refuses every
// list) gives up when its ctx ends, reports it, and has itself stopped
// every goroutine it started, the informers' and the one that watches ctx,
// before the caller's Close.
func TestStartThatCannotSyncLeavesNoGoroutine(t *testing.T) {
	noLeak := leakcheck.Check(t)
	kube := fake.NewClientset()
	listed := make(chan struct{})
	var once sync.Once
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(listed) })
		return true, nil, errors.New("the API server is unavailable")
	})
	rec := &recorder{}
	d, err := New(Config{Namespace: ns, Selector: "app=vllm", TargetPorts: []int32{8000}}, kube, nil, rec.sink, Options{})
	require.NoError(t, err)
	t.Cleanup(d.Close) // idempotent: a failed Start has closed it already

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan error, 1)
	go func() { started <- d.Start(ctx) }()
	<-listed // the informer is running and failing to list
	cancel()
	err = <-started
	require.ErrorContains(t, err, "did not sync")
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, d.Synced())
	require.Empty(t, rec.ids(), "nothing reached the Sink")
	noLeak()
}

// Close of a Discovery that was never started stops nothing and leaves
// nothing running.
func TestCloseWithoutStart(t *testing.T) {
	defer leakcheck.Check(t)()
	d, err := New(Config{Namespace: ns, Selector: "app=vllm", TargetPorts: []int32{8000}}, fake.NewClientset(), nil, (&recorder{}).sink, Options{})
	require.NoError(t, err)
	d.Close()
	d.Close()
	require.False(t, d.Synced())
}

// A Close that runs while Start hands the first endpoint set to the Sink
// (the caches have synced, Start does not follow changes yet) makes Start
// report that the Discovery was closed: Start does not begin following
// changes on a closed Discovery, whose Close did not wait for it.
func TestCloseDuringStartsFirstSinkStopsStart(t *testing.T) {
	noLeak := leakcheck.Check(t)
	var d *Discovery
	calls := 0
	sink := func([]kvroute.Endpoint) error {
		calls++
		d.Close() // Start is between the caches' sync and following changes
		return nil
	}
	d, err := New(Config{Namespace: ns, Selector: "app=vllm", TargetPorts: []int32{8000}}, fake.NewClientset(), nil, sink, Options{})
	require.NoError(t, err)
	err = d.Start(context.Background())
	require.ErrorIs(t, err, errClosedInStart)
	require.Equal(t, 1, calls)
	require.False(t, d.Synced())
	noLeak()
}

// A Close that runs while Start waits for the caches to sync makes Start
// report that the Discovery was closed, not a sync failure of its ctx.
func TestCloseWhileStartWaitsForSync(t *testing.T) {
	noLeak := leakcheck.Check(t)
	kube := fake.NewClientset()
	listed := make(chan struct{})
	var once sync.Once
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(listed) })
		return true, nil, errors.New("the API server is unavailable")
	})
	rec := &recorder{}
	d, err := New(Config{Namespace: ns, Selector: "app=vllm", TargetPorts: []int32{8000}}, kube, nil, rec.sink, Options{})
	require.NoError(t, err)
	started := make(chan error, 1)
	go func() { started <- d.Start(context.Background()) }()
	<-listed // the informer is running and failing to list
	d.Close()
	require.ErrorIs(t, <-started, errClosedInStart)
	require.False(t, d.Synced())
	require.Empty(t, rec.ids(), "nothing reached the Sink")
	noLeak()
}
