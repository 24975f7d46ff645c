package k8s

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// podSource is a pod informer of the namespace that lists and watches the
// pods of one label selector only, so that its cache holds the followed
// pods rather than every pod of the namespace.
type podSource struct {
	sel     string // the selector it lists with, labels.Selector.String()
	factory informers.SharedInformerFactory
	inf     cache.SharedIndexInformer
	synced  cache.InformerSynced // its handler has seen the initial list
	stop    chan struct{}
}

// newPodSource makes (without starting it) the pod informer of sel, its
// events poking the recompute.
func (d *Discovery) newPodSource(sel labels.Selector) (*podSource, error) {
	s := sel.String()
	f := informers.NewSharedInformerFactoryWithOptions(d.kube, 0, informers.WithNamespace(d.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = s }))
	inf := f.Core().V1().Pods().Informer()
	reg, err := inf.AddEventHandler(d.handler())
	if err != nil {
		return nil, err
	}
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		d.noteSyncError("pods", err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return nil, err
	}
	return &podSource{sel: s, factory: f, inf: inf, synced: reg.HasSynced, stop: make(chan struct{})}, nil
}

// shutdown stops the informer and waits for its goroutines.
func (s *podSource) shutdown() {
	close(s.stop)
	s.factory.Shutdown()
}

// podsFor returns the pod informer of sel and whether it has synced,
// replacing (and stopping) the one of another selector: the pool's
// selector changed, and its pods are listed anew with the new one. It
// returns nil after Close.
func (d *Discovery) podsFor(sel labels.Selector) (*podSource, bool) {
	d.podsMu.Lock()
	defer d.podsMu.Unlock()
	if d.podsDown {
		return nil, false
	}
	if s := sel.String(); d.pods == nil || d.pods.sel != s {
		src, err := d.newPodSource(sel)
		if err != nil {
			d.log.Warn("k8s: cannot follow the pods of the pool's selector", "selector", s, "err", err)
			return nil, false
		}
		if old := d.pods; old != nil {
			d.log.Info("k8s: the InferencePool's selector changed; listing its pods", "from", old.sel, "to", s)
			old.shutdown()
		}
		d.pods = src
		src.factory.Start(src.stop)
	}
	return d.pods, d.pods.synced()
}

func (d *Discovery) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.poke() },
		UpdateFunc: func(any, any) { d.poke() },
		DeleteFunc: func(any) { d.poke() },
	}
}

// poke schedules a recomputation; any number of pokes before it runs
// coalesce into one.
func (d *Discovery) poke() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}
