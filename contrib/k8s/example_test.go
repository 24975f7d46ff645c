package k8s_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/contrib/k8s"
)

// readyPod is a running pod with the given labels and readiness.
func readyPod(name, ip, app string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "llm", Labels: map[string]string{"app": app}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

// A Discovery over a label selector and two data-parallel ports: each
// Ready pod the selector matches is one endpoint per port, its rank the
// port's index; the un-Ready pod and the pod outside the selector are left
// out. Start feeds the first set to the Sink (Router.SetEndpoints in a
// deployment) before it returns. A fake clientset stands in for the
// Kubernetes API.
func ExampleDiscovery() {
	kube := fake.NewClientset(
		readyPod("vllm-0", "10.0.0.1", "vllm", true),
		readyPod("vllm-1", "10.0.0.2", "vllm", false),
		readyPod("web-0", "10.0.0.3", "web", true),
	)
	sink := func(eps []kvroute.Endpoint) error {
		for _, e := range eps {
			fmt.Println(e.ID, "rank", e.Rank)
		}
		return nil
	}
	d, err := k8s.New(k8s.Config{Namespace: "llm", Selector: "app=vllm", TargetPorts: []int32{8000, 8001}}, kube, nil, sink, k8s.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	if err := d.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("synced:", d.Synced())
	// Output:
	// 10.0.0.1:8000 rank 0
	// 10.0.0.1:8001 rank 1
	// synced: true
}
