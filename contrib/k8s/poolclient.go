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
// answered: whether the resource is not served. A change pokes a
// recomputation.
func (d *Discovery) poolServed(err error) {
	notServed := apierrors.IsNotFound(err)
	if d.poolNotServed.Swap(notServed) != notServed {
		d.poke()
	}
}
