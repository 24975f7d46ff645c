package tokenload

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
func (t *Tracker) AddPeerLoad(endpoint string, tokens, requests int64) {
	c := t.counters(endpoint)
	if tokens != 0 {
		c.peer.tokens.Add(tokens)
	}
	if requests != 0 {
		c.peer.requests.Add(requests)
	}
}
