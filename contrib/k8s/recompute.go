package k8s

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/kvroute/kvroute"
)

// recompute derives the endpoint set from the caches and hands it to the
// Sink when it changed.
func (d *Discovery) recompute() {
	sel, ports, poolErr := d.target()
	var store cache.Store
	if poolErr == nil {
		src, synced := d.podsFor(sel)
		if !synced {
			// The pool's selector changed and its pods are being listed
			// (or Close ran): the set stays as it is until they have
			// been, looked at again after the debounce.
			if src != nil {
				d.poke()
			}
			return
		}
		store = src.inf.GetStore()
	}
	var pods [][]kvroute.Endpoint // each Ready pod's endpoints, sorted by ID
	var problems [numProblems]int
	if poolErr == nil {
		var ready []*corev1.Pod
		for _, obj := range store.List() {
			if pod, ok := obj.(*corev1.Pod); ok && sel.Matches(labels.Set(pod.Labels)) && podReady(pod) {
				ready = append(ready, pod)
			}
		}
		// Oldest first: of pods that would give the same endpoint ID
		// (hostNetwork pods on one node serving one port, of which only
		// one can hold it), the first created keeps it.
		slices.SortFunc(ready, podAge)
		taken := make(map[string]string) // endpoint ID → the pod that has it
		for _, pod := range ready {
			var probs podProblems
			if pe := podEndpoints(pod, ports, d.cfg, d.warn, &probs); len(pe) > 0 {
				if other, dup := firstTaken(pe, taken); dup != "" {
					probs[problemDuplicateAddress] = true
					d.warn.warn(pod, "endpoint ID", dup, "k8s: leaving out a Ready pod whose endpoint ID another pod already has",
						"endpoint", dup, "other", other, "hostNetwork", pod.Spec.HostNetwork)
				} else {
					for _, ep := range pe {
						taken[ep.ID] = pod.Namespace + "/" + pod.Name
					}
					slices.SortFunc(pe, byID)
					pods = append(pods, pe)
				}
			}
			for i, p := range probs {
				if p {
					problems[i]++
				}
			}
		}
	}
	d.warn.done()
	eps, cut := boundPods(pods, d.cfg.MaxEndpoints)
	if cut != d.cut {
		if cut.pods > 0 {
			d.log.Warn("k8s: endpoint set over its bound; whole pods left out", "max", d.cfg.MaxEndpoints,
				"endpoints", len(eps), "podsLeftOut", cut.pods, "endpointsLeftOut", cut.endpoints, "firstLeftOut", cut.first)
		} else if d.cut.pods > 0 {
			d.log.Info("k8s: endpoint set within its bound again; no pod left out", "max", d.cfg.MaxEndpoints, "endpoints", len(eps))
		}
		d.cut = cut
	}
	for i, n := range problems {
		d.met.problems[i].Set(float64(n))
	}
	d.met.endpoints.Set(float64(len(eps)))
	d.met.leftOut.Set(float64(cut.endpoints))
	d.met.podsLeftOut.Set(float64(cut.pods))
	d.met.poolUnusable.Set(0)
	if poolErr != nil {
		d.met.poolUnusable.Set(1)
	}
	d.mu.Lock()
	if poolErr != nil && (d.poolErr == nil || d.poolErr.Error() != poolErr.Error()) {
		d.log.Warn("k8s: InferencePool unusable; no endpoints", "err", poolErr)
	}
	d.poolErr = poolErr
	// Once Close has run the Sink is not called: closed is read under the
	// lock Close sets it under, and sinking, set in the same critical
	// section, tells Close a call is under way.
	// After a failed call the Sink may hold any set (see Sink), so the set
	// is sent even when it equals the one last accepted.
	if d.closed || (slices.EqualFunc(eps, d.current, endpointEqual) && d.sinkCalls > 0 && !d.resend) {
		d.mu.Unlock()
		return
	}
	d.sinking = true
	d.mu.Unlock()
	err := d.sink(slices.Clone(eps))
	d.mu.Lock()
	d.sinking = false
	d.resend = err != nil
	if err == nil {
		d.current = eps
		d.sinkCalls++
	}
	d.mu.Unlock()
	if err != nil {
		d.met.sinkErrors.Inc()
		d.log.Warn("k8s: the endpoint sink failed; the set is sent again at the next change", "err", err)
	}
}

// podAge orders pods by creation, then namespace and name.
func podAge(a, b *corev1.Pod) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Or(cmpString(a.Namespace, b.Namespace), cmpString(a.Name, b.Name))
}

// firstTaken returns the first of eps' IDs another pod already has, and
// that pod ("" when none is taken).
func firstTaken(eps []kvroute.Endpoint, taken map[string]string) (pod, id string) {
	for _, ep := range eps {
		if p, ok := taken[ep.ID]; ok {
			return p, ep.ID
		}
	}
	return "", ""
}

// target returns the selector and ports in force: the pool's, or the
// configured ones.
func (d *Discovery) target() (labels.Selector, []int32, error) {
	if d.poolInf == nil {
		return d.selector, d.cfg.TargetPorts, nil
	}
	if !d.poolSynced() {
		// Start stopped waiting for the informer because the API server
		// did not serve the pool's resource.
		if d.poolNotServed.Load() {
			return nil, nil, fmt.Errorf("k8s: InferencePool CRD %s not installed", d.gvr.GroupVersion())
		}
		// It serves it now, and the informer is listing, or its list
		// failed otherwise than NotFound, which says neither: look again
		// after the debounce until it has listed.
		d.poke()
		if e := d.poolListErr.Load(); e != nil {
			return nil, nil, fmt.Errorf("k8s: InferencePool CRD %s: InferencePools cannot be listed: %s", d.gvr.GroupVersion(), *e)
		}
		return nil, nil, fmt.Errorf("k8s: InferencePool CRD %s installed; InferencePools not listed yet", d.gvr.GroupVersion())
	}
	obj, ok, err := d.poolInf.GetStore().GetByKey(d.cfg.Namespace + "/" + d.cfg.Pool)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, fmt.Errorf("k8s: InferencePool %s/%s not found", d.cfg.Namespace, d.cfg.Pool)
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, fmt.Errorf("k8s: InferencePool %s/%s: unexpected object %T", d.cfg.Namespace, d.cfg.Pool, obj)
	}
	// A pool being deleted (finalizers pending) is gone, as for the
	// Inference Extension's picker, which clears its datastore for it.
	if u.GetDeletionTimestamp() != nil {
		return nil, nil, fmt.Errorf("k8s: InferencePool %s/%s is being deleted", d.cfg.Namespace, d.cfg.Pool)
	}
	p, err := DecodeInferencePool(u)
	if err != nil {
		return nil, nil, err
	}
	return labels.SelectorFromSet(p.Selector), p.TargetPorts, nil
}

// leftOut is what boundPods cut: how many pods, their endpoints, and the
// first pod's first endpoint ID.
type leftOut struct {
	pods, endpoints int
	first           string
}

// boundPods returns the endpoints of pods, each pod's sorted by ID, as one
// set sorted by ID within bound endpoints, and what it left out. It cuts
// whole pods, never some of one pod's data-parallel ranks: the pods are
// taken in the order of their endpoint IDs until the next would pass bound,
// and that pod and the ones after it are left out. (hostNetwork pods on
// one node share an IP: their endpoints, on different ports, may
// interleave, so the set is sorted once assembled.)
func boundPods(pods [][]kvroute.Endpoint, bound int) ([]kvroute.Endpoint, leftOut) {
	slices.SortFunc(pods, func(a, b []kvroute.Endpoint) int { return byID(a[0], b[0]) })
	var eps []kvroute.Endpoint
	var cut leftOut
	for _, pe := range pods {
		if cut.pods == 0 && len(eps)+len(pe) <= bound {
			eps = append(eps, pe...)
			continue
		}
		if cut.pods == 0 {
			cut.first = pe[0].ID
		}
		cut.pods++
		cut.endpoints += len(pe)
	}
	slices.SortFunc(eps, byID)
	return eps, cut
}

func byID(a, b kvroute.Endpoint) int { return cmpString(a.ID, b.ID) }

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
