package k8s

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// While the InferencePool CRD is not installed, a list of the pools that
// fails otherwise (an API server that does not answer, a refusal) says
// nothing of whether the resource is served: PoolError gives that failure
// instead of "installed; InferencePools not listed yet", and once the
// lists are answered NotFound again the CRD is reported missing again.
func TestPoolListFailureIsNotReportedAsTheCRDInstalled(t *testing.T) {
	defer leakcheck.Check(t)()
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		PoolV1: "InferencePoolList",
	})
	var failing atomic.Bool
	answer := func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, apierrors.NewServiceUnavailable("etcd is unavailable")
		}
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: PoolV1.Group, Resource: PoolV1.Resource}, "")
	}
	dyn.PrependReactor("list", "inferencepools", answer)
	dyn.PrependWatchReactor("inferencepools", func(a k8stesting.Action) (bool, watch.Interface, error) {
		_, _, err := answer(a)
		return true, nil, err
	})
	rec := &recorder{}
	d, err := New(Config{Namespace: ns, Pool: "pool", Debounce: 10 * time.Millisecond}, fake.NewClientset(), dyn, rec.sink,
		Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry()}})
	require.NoError(t, err)
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, d.Start(ctx))
	const missing = "k8s: InferencePool CRD inference.networking.k8s.io/v1 not installed"
	require.EqualError(t, d.PoolError(), missing)

	failing.Store(true)
	require.Eventually(t, func() bool {
		err := d.PoolError()
		return err != nil && strings.Contains(err.Error(), "etcd is unavailable")
	}, wait, 5*time.Millisecond, "the failed list is the reason")
	require.NotContains(t, d.PoolError().Error(), "CRD inference.networking.k8s.io/v1 installed")

	failing.Store(false)
	require.Eventually(t, func() bool {
		err := d.PoolError()
		return err != nil && err.Error() == missing
	}, wait, 5*time.Millisecond, "NotFound again: the CRD is missing")
	require.Empty(t, rec.ids())
}
