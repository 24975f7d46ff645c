package k8s

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
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

// A cluster without the InferencePool CRD (the API server answers its
// list with NotFound) does not keep Start waiting for a cache that cannot
// sync: Start returns, the set is empty, PoolError says which CRD is not
// installed and it is logged once, while the informer keeps retrying (with
// its backoff). Once the CRD is installed the pool is followed: not found
// until it is created, then its pods.
func TestMissingInferencePoolCRDIsReportedAndRetried(t *testing.T) {
	defer leakcheck.Check(t)()
	vllm := map[string]string{"app": "vllm"}
	kube := fake.NewClientset(pod("a", "10.0.0.1", vllm, true))
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		PoolV1: "InferencePoolList",
	})
	var installed atomic.Bool
	var lists atomic.Int32
	notServed := func(action k8stesting.Action) (bool, runtime.Object, error) {
		if installed.Load() {
			return false, nil, nil
		}
		if action.GetVerb() == "list" {
			lists.Add(1)
		}
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: PoolV1.Group, Resource: PoolV1.Resource}, "")
	}
	dyn.PrependReactor("list", "inferencepools", notServed)
	dyn.PrependWatchReactor("inferencepools", func(action k8stesting.Action) (bool, watch.Interface, error) {
		_, _, err := notServed(action)
		return err != nil, nil, err
	})
	logs := &logCounter{}
	rec := &recorder{}
	d, err := New(Config{Namespace: ns, Pool: "pool", Debounce: 10 * time.Millisecond}, kube, dyn, rec.sink,
		Options{Set: telemetry.Set{Logger: slog.New(logs), Registerer: prometheus.NewRegistry()}})
	require.NoError(t, err)
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, d.Start(ctx))
	require.True(t, d.Synced())
	require.Empty(t, rec.ids())
	require.EqualError(t, d.PoolError(), "k8s: InferencePool CRD inference.networking.k8s.io/v1 not installed")
	require.Equal(t, float64(1), testutil.ToFloat64(d.met.poolUnusable))

	// The informer retries; the reason is logged once.
	require.Eventually(t, func() bool { return lists.Load() >= 2 }, wait, 5*time.Millisecond)
	require.Equal(t, 1, logs.count("not installed"))

	installed.Store(true)
	require.Eventually(t, func() bool {
		err := d.PoolError()
		return err != nil && strings.Contains(err.Error(), "not found")
	}, wait, 5*time.Millisecond, "the CRD is installed, the pool is not created yet")
	_, err = dyn.Resource(PoolV1).Namespace(ns).Create(context.Background(), poolObj(PoolV1, "pool", v1Spec(8000)), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return fmt.Sprint(rec.ids()) == "[10.0.0.1:8000]" }, wait, 5*time.Millisecond)
	require.NoError(t, d.PoolError())
	require.Equal(t, 1, logs.count("not installed"))
}

// While a list of the pods is refused (a ServiceAccount without the RBAC
// verb), Start waits and SyncError says why; once the list is allowed the
// caches sync, Start returns and SyncError is nil.
func TestSyncErrorSaysWhyTheCachesHaveNotSynced(t *testing.T) {
	defer leakcheck.Check(t)()
	kube := fake.NewClientset(pod("a", "10.0.0.1", map[string]string{"app": "vllm"}, true))
	var allowed atomic.Bool
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "",
		errors.New(`User "system:serviceaccount:llm:kvroute-epp" cannot list resource "pods"`))
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if allowed.Load() {
			return false, nil, nil
		}
		return true, nil, forbidden
	})
	rec := &recorder{}
	d, err := New(Config{Namespace: ns, Selector: "app=vllm", TargetPorts: []int32{8000}, Debounce: 10 * time.Millisecond},
		kube, nil, rec.sink, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry()}})
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.SyncError(), "no list has been refused yet")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	started := make(chan error, 1)
	go func() { started <- d.Start(ctx) }()
	require.Eventually(t, func() bool {
		err := d.SyncError()
		return err != nil && strings.Contains(err.Error(), "forbidden") && strings.Contains(err.Error(), "pods")
	}, wait, 5*time.Millisecond, "the refused list is the reason")
	require.False(t, d.Synced())

	allowed.Store(true)
	require.NoError(t, <-started)
	require.True(t, d.Synced())
	require.NoError(t, d.SyncError())
	require.Equal(t, "[10.0.0.1:8000]", fmt.Sprint(rec.ids()))
}

// A second Start is refused with an error and changes nothing: it would
// run a second loop beside the first (two recomputes at once), and Close
// would then close the loop's channel twice.
func TestSecondStartIsRefused(t *testing.T) {
	defer leakcheck.Check(t)()
	kube := fake.NewClientset(pod("a", "10.0.0.1", map[string]string{"app": "vllm"}, true))
	rec := &recorder{}
	d, err := New(Config{Namespace: ns, Selector: "app=vllm", TargetPorts: []int32{8000}}, kube, nil, rec.sink, Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, d.Start(ctx))
	require.ErrorContains(t, d.Start(ctx), "started already")
	d.Close()
	require.Equal(t, 1, d.SinkCalls())
	require.Equal(t, "[10.0.0.1:8000]", fmt.Sprint(rec.ids()))
}
