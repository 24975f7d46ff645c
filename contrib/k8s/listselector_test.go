package k8s

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// podSelectors returns the label selectors of the pod lists and watches the
// Discovery asked the API server for, in order.
func (f *fixture) podSelectors() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if a.GetResource().Resource != "pods" {
			continue
		}
		switch a := a.(type) {
		case k8stesting.ListAction:
			out = append(out, "list "+a.GetListRestrictions().Labels.String())
		case k8stesting.WatchAction:
			out = append(out, "watch "+a.GetWatchRestrictions().Labels.String())
		}
	}
	return out
}

// The pod informer lists and watches only the pods of the selector it
// follows (the configured one, or the InferencePool's), so that its cache
// holds those pods, not every pod of the namespace: memory bounded by the
// pool, not by whatever else the namespace runs. When the pool's selector
// changes the pods are listed again with the new one, and the set follows.
func TestPodsAreListedWithTheSelector(t *testing.T) {
	defer leakcheck.Check(t)()
	pods := []*corev1.Pod{
		pod("a", "10.0.0.1", map[string]string{"app": "vllm"}, true),
		pod("b", "10.0.0.2", map[string]string{"app": "sglang"}, true),
	}

	f := newFixture(t, Config{Selector: "app=vllm", TargetPorts: []int32{8000}}, pods)
	f.eventually(t, "10.0.0.1:8000")
	require.Equal(t, []string{"list app=vllm", "watch app=vllm"}, f.podSelectors())
	f.d.Close()

	f = newFixture(t, Config{Pool: "pool"}, pods, poolObj(PoolV1, "pool", v1Spec(8000)))
	defer f.d.Close()
	f.eventually(t, "10.0.0.1:8000")
	require.Equal(t, []string{"list app=vllm", "watch app=vllm"}, f.podSelectors())

	spec := v1Spec(8000)
	spec["selector"] = map[string]any{"matchLabels": map[string]any{"app": "sglang"}}
	_, err := f.dyn.Resource(PoolV1).Namespace(ns).Update(context.Background(), poolObj(PoolV1, "pool", spec), metav1.UpdateOptions{})
	require.NoError(t, err)
	f.eventually(t, "10.0.0.2:8000")
	require.Eventually(t, func() bool {
		s := f.podSelectors()
		return len(s) == 4 && s[2] == "list app=sglang" && s[3] == "watch app=sglang"
	}, wait, time.Millisecond, "listed again with the new selector: %v", f.podSelectors())

	// A pod relabelled into the new selector joins; one out of it leaves.
	f.updatePod(t, pod("a", "10.0.0.1", map[string]string{"app": "sglang"}, true))
	f.eventually(t, "10.0.0.1:8000", "10.0.0.2:8000")
	f.updatePod(t, pod("b", "10.0.0.2", map[string]string{"app": "other"}, true))
	f.eventually(t, "10.0.0.1:8000")
}
