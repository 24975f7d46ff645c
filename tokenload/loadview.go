package tokenload

import "unsafe"

// LoadView is a caller's cached resolution of a list of endpoint IDs to
// their counters, for LoadAll: a router reads the load of the same
// candidates on every request, and resolving each ID in the tracker's map
// costs a string hash and a probe per candidate, several times the read
// itself. The zero value is an empty view; keep one per goroutine (a
// pooled per-request scratch), as it is not safe for concurrent use.
type LoadView struct {
	ids []string
	cs  []*counters // nil: the tracker had no counters for ids[i]
	gen uint64
	t   *Tracker
}

// LoadAll writes the committed load of every endpoint of ids into tokens
// and requests (each at least len(ids) long), as Load would return it for
// each: an endpoint without counters has zero load. It re-resolves the IDs
// through v only when they differ from the view's or when an endpoint's
// counters were created or removed since; otherwise it reads the cached
// counters directly. It does not allocate once v has grown to len(ids).
func (t *Tracker) LoadAll(v *LoadView, ids []string, tokens, requests []int64) {
	tokens, requests = tokens[:len(ids)], requests[:len(ids)]
	t.View(v, ids, false)
	for i := range ids {
		tokens[i], requests[i] = v.Load(i)
	}
}

// View makes v resolve ids in t, as LoadAll does, without reading their
// load: the caller reads each endpoint's with v.Load(i) in a pass of its
// own. same reports that the caller already compared its list with the one
// it passed before through v (a router compares its candidate list once
// per request and shares the answer): ids holds, element for element, the
// same strings, so only the tracker's changes are checked, not every ID
// again. A list of another length is resolved again whatever same says.
func (t *Tracker) View(v *LoadView, ids []string, same bool) {
	if same {
		same = v.t == t && len(v.ids) == len(ids) && v.gen == t.gen.Load()
	} else {
		same = v.valid(t, ids)
	}
	if !same {
		v.resolve(t, ids)
	}
}

// Load returns the committed load of endpoint i of the list v was last
// resolved for (Tracker.View, Tracker.LoadAll), as Tracker.Load gives it:
// zero for an endpoint without counters.
func (v *LoadView) Load(i int) (tokens, requests int64) {
	c := v.cs[i]
	if c == nil {
		return 0, 0
	}
	return withPeer(c.tokens.Load(), c.peer.tokens.Load()), withPeer(c.requests.Load(), c.peer.requests.Load())
}

// valid reports whether v resolves exactly ids in t as t is now.
func (v *LoadView) valid(t *Tracker, ids []string) bool {
	if v.t != t || len(v.ids) != len(ids) || v.gen != t.gen.Load() {
		return false
	}
	for i, id := range ids {
		if w := v.ids[i]; unsafe.StringData(w) != unsafe.StringData(id) || len(w) != len(id) {
			if w != id {
				return false
			}
		}
	}
	return true
}

// resolve looks every ID up in t's map, under the generation read first:
// a change that lands while it runs leaves the view stale for the next
// call, never wrong for longer.
func (v *LoadView) resolve(t *Tracker, ids []string) {
	v.t, v.gen = t, t.gen.Load()
	v.ids = append(v.ids[:0], ids...)
	v.cs = v.cs[:0]
	for _, id := range ids {
		c, _ := t.endpoints.Load(id)
		v.cs = append(v.cs, c)
	}
}

// DispatchAt is DispatchInto for the endpoint at index i of the list v
// last read (LoadAll), named endpoint: it takes the counters v resolved for
// it instead of looking the endpoint up, unless the view does not hold
// that endpoint at i or an endpoint's counters were created or removed
// since (then it looks it up, as DispatchInto does). A router dispatches to
// one of the candidates whose load it has just read.
func (t *Tracker) DispatchAt(h *Inflight, v *LoadView, i int, endpoint string, uncachedTokens int64) {
	var c *counters
	if v.t == t && i >= 0 && i < len(v.cs) && v.gen == t.gen.Load() && v.ids[i] == endpoint {
		c = v.cs[i]
	}
	if c == nil {
		t.DispatchInto(h, endpoint, uncachedTokens)
		return
	}
	t.dispatch(h, c, endpoint, uncachedTokens)
}
