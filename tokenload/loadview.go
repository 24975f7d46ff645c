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
	if !v.valid(t, ids) {
		v.resolve(t, ids)
	}
	for i, c := range v.cs[:len(ids)] {
		if c == nil {
			tokens[i], requests[i] = 0, 0
			continue
		}
		tokens[i] = c.tokens.Load() + max(c.peer.tokens.Load(), 0)
		requests[i] = c.requests.Load() + max(c.peer.requests.Load(), 0)
	}
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
