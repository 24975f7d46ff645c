package tokenload

import (
	"math"
	"sync/atomic"
)

// LoadObserver is told every change of a Tracker's own (local) load, right
// after the counters changed: a dispatch adds (tokens, 1), a first chunk
// releases (-tokens, 0), the end of a request (-remaining tokens, -1). Router
// replicas use it to share each change with their peers as it happens
// instead of only in their periodic totals. It runs on the request path, so
// it must be quick, must not block and should not allocate.
type LoadObserver func(endpoint string, tokens, requests int64)

// SetObserver installs fn as the tracker's load observer (nil removes it);
// changes already made are not replayed. Handles dispatched by this tracker
// report to whatever observer is installed when they release.
func (t *Tracker) SetObserver(fn LoadObserver) {
	if fn == nil {
		t.observer.Store(nil)
		return
	}
	t.observer.Store(&fn)
}

func (t *Tracker) observe(endpoint string, tokens, requests int64) {
	if t == nil {
		return
	}
	if fn := t.observer.Load(); fn != nil {
		(*fn)(endpoint, tokens, requests)
	}
}

// AddPeerLoad adds a change of the other router replicas' load on endpoint
// (negative releases it) on top of what SetPeerLoads last set, until the
// next SetPeerLoads replaces it. Load never reports a negative peer share.
// The sum saturates at the int64 range instead of wrapping: the changes
// come from the peers, and a wrapped sum would make a loaded endpoint look
// idle.
func (t *Tracker) AddPeerLoad(endpoint string, tokens, requests int64) {
	c := t.counters(endpoint)
	if tokens != 0 {
		addSaturated(&c.peer.tokens, tokens)
	}
	if requests != 0 {
		addSaturated(&c.peer.requests, requests)
	}
}

// addSaturated adds n to a, saturating at math.MaxInt64 and math.MinInt64.
func addSaturated(a *atomic.Int64, n int64) {
	for {
		old := a.Load()
		if a.CompareAndSwap(old, saturatingAdd(old, n)) {
			return
		}
	}
}

// saturatingAdd is a + n, saturating at math.MaxInt64 and math.MinInt64.
func saturatingAdd(a, n int64) int64 {
	v := a + n
	if (v > a) != (n > 0) { // wrapped
		v = math.MaxInt64
		if n < 0 {
			v = math.MinInt64
		}
	}
	return v
}

// withPeer is an endpoint's local load plus its peers' share (negative
// counting as 0), saturating at math.MaxInt64; local is never negative.
func withPeer(local, peer int64) int64 {
	peer = max(peer, 0)
	return min(local, math.MaxInt64-peer) + peer
}
