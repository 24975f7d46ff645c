package k8s

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvindex"
)

// Discovery feeding a real Router: a pod that stops being Ready loses its
// event subscription and its index entries, and comes back empty.
func TestRouterDropsIndexEntriesOfPodsThatLeave(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg := kvroute.DefaultConfig()
	cfg.Model = "m"
	cfg.BlockSize = 4
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	require.NoError(t, err)
	defer router.Close()
	vllm := map[string]string{"app": "vllm"}
	fx := newFixtureWithSink(t, Config{Selector: "app=vllm", TargetPorts: []int32{8000}},
		[]*corev1.Pod{pod("a", "127.0.0.1", vllm, true), pod("b", "127.0.0.2", vllm, true)}, router.SetEndpoints)
	defer fx.d.Close()
	require.Eventually(t, func() bool { return len(router.Events().Endpoints()) == 2 }, wait, 5*time.Millisecond)

	ix := router.Index()
	require.NoError(t, ix.Store("127.0.0.1:8000", &kvindex.StoreEvent{
		EngineHashes: []uint64{1, 2}, Tokens: []uint32{1, 2, 3, 4, 5, 6, 7, 8}, BlockSize: 4, Model: "m", Group: -1}))
	require.EqualValues(t, 2, ix.Stats().Memberships)

	fx.updatePod(t, pod("a", "127.0.0.1", vllm, false))
	require.Eventually(t, func() bool {
		_, subscribed := router.Events().Status("127.0.0.1:8000")
		return !subscribed && ix.Stats().Memberships == 0
	}, wait, 5*time.Millisecond)
	_, stillThere := router.Events().Status("127.0.0.2:8000")
	require.True(t, stillThere, "the other pod keeps its subscription")
	require.NoError(t, fx.kube.CoreV1().Pods(ns).Delete(context.Background(), "b", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return len(router.Events().Endpoints()) == 0 }, wait, 5*time.Millisecond)
}

// A Kubernetes label selector, passed to the Router as its event selector,
// decides with Kubernetes' own semantics which pods' KV events are
// subscribed; relabelling a pod out of it unsubscribes it.
func TestKubernetesSelectorDecidesEventSubscriptions(t *testing.T) {
	defer leakcheck.Check(t)()
	sel, err := labels.Parse("tier in (a,b),!canary")
	require.NoError(t, err)
	cfg := kvroute.DefaultConfig()
	cfg.Model = "m"
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{EventSelector: Matcher(sel)})
	require.NoError(t, err)
	defer router.Close()
	fx := newFixtureWithSink(t, Config{Selector: "app=vllm", TargetPorts: []int32{8000}}, []*corev1.Pod{
		pod("a", "127.0.0.1", map[string]string{"app": "vllm", "tier": "a"}, true),
		pod("b", "127.0.0.2", map[string]string{"app": "vllm", "tier": "b", "canary": ""}, true),
		pod("c", "127.0.0.3", map[string]string{"app": "vllm", "tier": "c"}, true),
	}, router.SetEndpoints)
	defer fx.d.Close()
	require.Eventually(t, func() bool {
		eps := router.Events().Endpoints()
		return len(eps) == 1 && eps[0] == "127.0.0.1:8000"
	}, wait, 5*time.Millisecond)
	fx.updatePod(t, pod("a", "127.0.0.1", map[string]string{"app": "vllm", "tier": "a", "canary": "yes"}, true))
	require.Eventually(t, func() bool { return len(router.Events().Endpoints()) == 0 }, wait, 5*time.Millisecond)
}
