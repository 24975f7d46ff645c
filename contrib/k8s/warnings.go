package k8s

import (
	"hash/maphash"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
)

// podWarnings logs each problem of a pod's labels or annotations once per
// value: when a pod first shows it, or when the offending value changes,
// not at every recompute, so that a steady state with one bad pod does not
// repeat its warning forever (kvroute_k8s_discovery_pod_problems shows the
// state meanwhile). It remembers the problems the last recompute saw and
// no others: a pod that is gone, or fixed, is forgotten, and memory stays
// within one entry per problem of a pod in the informer's cache. Values are
// kept as hashes, so a large annotation is not held twice.
//
// Ownership: recompute is its only user (one goroutine at a time, see
// Discovery).
type podWarnings struct {
	log  *slog.Logger
	seed maphash.Seed
	last map[podField]uint64 // the problems of the previous recompute: the value's hash
	next map[podField]uint64 // those of the recompute in progress
}

// podField names one label or annotation of one pod.
type podField struct{ pod, field string }

func newPodWarnings(log *slog.Logger) *podWarnings {
	return &podWarnings{log: log, seed: maphash.MakeSeed()}
}

// warn logs msg with the pod's name and args unless the previous recompute
// saw the same value of field on the same pod, and remembers it for the
// next.
func (w *podWarnings) warn(p *corev1.Pod, field, value, msg string, args ...any) {
	name := p.Namespace + "/" + p.Name
	k, h := podField{pod: name, field: field}, maphash.String(w.seed, value)
	if w.next == nil {
		w.next = make(map[podField]uint64)
	}
	w.next[k] = h
	if old, ok := w.last[k]; ok && old == h {
		return
	}
	w.log.Warn(msg, append([]any{"pod", name}, args...)...)
}

// done ends a recompute: the problems it saw are what the next one
// compares against, and the pods it did not see are forgotten.
func (w *podWarnings) done() {
	w.last, w.next = w.next, nil
}
