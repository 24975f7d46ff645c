package k8s

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/watchlist"

	"github.com/kvroute/kvroute/internal/recent"
)

// poolClient is the dynamic client the pool's informer lists and watches
// with: it tells its Discovery whether the API server serves the pool's
// resource. A list or watch of a namespace's collection is answered
// NotFound only when the resource itself is not served (its CRD is not
// installed); the Discovery then stops waiting for the informer, reports
// the missing CRD, and recomputes when an answer shows the resource served
// again.
type poolClient struct {
	dynamic.Interface
	d *Discovery
}

// IsWatchListSemanticsUnSupported passes on what the wrapped client says
// of its watch-list support (client-go's fakes have none), which the
// informer's reflector asks of its client.
func (c poolClient) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.Interface)
}

func (c poolClient) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return poolResource{c.Interface.Resource(gvr), c.d}
}

type poolResource struct {
	dynamic.NamespaceableResourceInterface
	d *Discovery
}

func (r poolResource) Namespace(ns string) dynamic.ResourceInterface {
	return poolNamespaced{r.NamespaceableResourceInterface.Namespace(ns), r.d}
}

type poolNamespaced struct {
	dynamic.ResourceInterface
	d *Discovery
}

func (r poolNamespaced) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	l, err := r.ResourceInterface.List(ctx, opts)
	r.d.poolServed(err)
	return l, err
}

func (r poolNamespaced) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := r.ResourceInterface.Watch(ctx, opts)
	r.d.poolServed(err)
	return w, err
}

// poolServed records what a list or watch of the pool's resource was
// answered: NotFound, the resource is not served; no error, it is; any
// other error (an API server that does not answer, a refusal) says
// neither, and is kept as the reason the pools are not listed. A change
// pokes a recomputation.
func (d *Discovery) poolServed(err error) {
	notServed := apierrors.IsNotFound(err)
	var failed *string
	if err != nil && !notServed {
		s, _ := recent.Clip(err.Error()) // an API server's answer, shown on the readiness endpoint
		failed = &s
	}
	changed := d.poolNotServed.Swap(notServed) != notServed
	if old := d.poolListErr.Swap(failed); (old == nil) != (failed == nil) || (old != nil && *old != *failed) {
		changed = true
	}
	if changed {
		d.poke()
	}
}
