package k8s

import (
	"errors"
	"slices"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/recent"
)

// Synced reports whether the informers have synced and the first endpoint
// set was computed: a readiness signal for the host.
func (d *Discovery) Synced() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.synced
}

// Endpoints returns the current endpoint set (a copy): the set the Sink
// last accepted (returned nil for).
func (d *Discovery) Endpoints() []kvroute.Endpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.current)
}

// SinkCalls returns how many calls of the Sink succeeded (returned nil),
// for tests and metrics of churn.
func (d *Discovery) SinkCalls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sinkCalls
}

// SyncError returns, while Start waits for the informers' caches, the last
// error a list or watch of the pods or of the pool's resource reported —
// why the caches have not synced: a ServiceAccount without list or watch
// on them ("forbidden"), an API server that does not answer — so that a
// host's readiness can say it instead of only "not synced". Nil once
// synced, and before any error. A missing InferencePool CRD is not one of
// them: Start does not wait for it, and PoolError names it.
func (d *Discovery) SyncError() error {
	if d.Synced() {
		return nil
	}
	if s := d.syncErr.Load(); s != nil {
		return errors.New(*s)
	}
	return nil
}

// noteSyncError records err, reported by a list or watch of what, for
// SyncError.
func (d *Discovery) noteSyncError(what string, err error) {
	// Cut as the status pages cut a client's text (recent.Clip): it is an
	// API server's answer, shown on the readiness endpoint.
	s, _ := recent.Clip("k8s: listing or watching " + what + ": " + err.Error())
	d.syncErr.Store(&s)
}

// PoolError returns why the followed InferencePool is unusable (missing,
// being deleted, its CRD not installed, the pools not listed since,
// empty selector, no port), nil when it is fine.
func (d *Discovery) PoolError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.poolErr
}
