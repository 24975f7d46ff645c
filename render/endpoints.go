package render

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/internal/endpointid"
)

// Endpoint is one renderer the Client may call.
type Endpoint struct {
	// ID identifies the endpoint (kvroute uses "ip:port"); the snapshot is
	// ordered by ID so that the order of updates does not change selection.
	ID string `json:"id"`
	// URL is the base URL, such as "http://10.0.0.7:8000"; the render paths
	// are appended to it.
	URL string `json:"url"`
	// Models are the models the endpoint serves; a Request naming another
	// Model is not rendered there. Empty renders any model.
	Models []string `json:"models,omitempty"`
}

// target is an endpoint with its request URLs precomputed, one per route,
// and its render load (kept across endpoint updates by ID).
type target struct {
	id     string
	base   string
	models []string // Endpoint.Models; empty serves any model
	urls   [numRoutes]string
	st     *endpointState
}

func newTarget(id, base string, st *endpointState) *target {
	base = strings.TrimRight(base, "/")
	t := &target{id: id, base: base, st: st}
	for r := range numRoutes {
		t.urls[r] = base + routePaths[r]
	}
	return t
}

// picker hands out targets round-robin over an immutable sorted snapshot.
type picker struct {
	fixed    *target // non-nil with a fixed URL
	snap     atomic.Pointer[[]*target]
	cursor   atomic.Uint64
	newState func() *endpointState // the load of an endpoint new to the snapshot
	now      func() time.Time      // the Client's clock, for the routes passed over (endpointState.benched)

	mu sync.Mutex // serializes set
	// retired holds the state of endpoints that left the snapshot (see
	// set), so that one coming back finds its renders still in flight.
	retired map[string]*endpointState
}

// set replaces the snapshot. Endpoints with an empty ID, an ID that is not
// UTF-8 or is over endpointid.MaxBytes (it labels the capacity gauges) or
// an invalid URL are left out and reported in the returned error; of
// duplicate IDs the last one wins.
//
// An endpoint keeps its state (its gate, latency and queue wait) by ID, also
// across an update that leaves it out: a readiness flap must not hand it a
// fresh gate while its renders still run, or the concurrency limit and the
// queue would stop applying to it. The state of an endpoint left out is
// retired, and dropped by the first later update that finds its gate idle
// (no render in flight or queued; one update later, a render that picked the
// endpoint from an older snapshot has long taken its slot), so that what is
// kept is bounded by the endpoints removed in the last update and those
// still busy.
func (p *picker) set(eps []Endpoint) error {
	byID := make(map[string]Endpoint, len(eps))
	var errs []error
	for _, ep := range eps {
		if ep.ID == "" {
			errs = append(errs, fmt.Errorf("endpoint with URL %q has no ID", ep.URL))
			continue
		}
		// The ID labels the capacity gauges: a value a scrape can export.
		if err := endpointid.Check(ep.ID); err != nil {
			errs = append(errs, fmt.Errorf("endpoint with URL %q: %w", ep.URL, err))
			continue
		}
		if err := validateBaseURL(ep.URL); err != nil {
			errs = append(errs, fmt.Errorf("endpoint %s: %w", ep.ID, err))
			continue
		}
		byID[ep.ID] = ep
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := make(map[string]*endpointState, len(p.retired))
	for id, st := range p.retired {
		old[id] = st
	}
	if s := p.snap.Load(); s != nil {
		for _, t := range *s {
			old[t.id] = t.st
		}
	}
	ts := make([]*target, 0, len(byID))
	for _, ep := range byID {
		st := old[ep.ID]
		if st == nil {
			st = p.newState()
		}
		delete(old, ep.ID)
		t := newTarget(ep.ID, ep.URL, st)
		t.models = slices.Clone(ep.Models)
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b *target) int { return strings.Compare(a.id, b.id) })
	p.snap.Store(&ts)
	// What is left in old has left the snapshot: this update retires it,
	// a later one drops it once idle.
	var retired map[string]*endpointState
	for id, st := range old {
		if _, was := p.retired[id]; was && st.idle() {
			continue
		}
		if retired == nil {
			retired = make(map[string]*endpointState)
		}
		retired[id] = st
	}
	p.retired = retired
	if len(errs) > 0 {
		return fmt.Errorf("render: endpoints left out: %w", errors.Join(errs...))
	}
	return nil
}

func (p *picker) endpoints() []Endpoint {
	if p.fixed != nil {
		return []Endpoint{{ID: p.fixed.id, URL: p.fixed.base}}
	}
	s := p.snap.Load()
	if s == nil {
		return nil
	}
	out := make([]Endpoint, len(*s))
	for i, t := range *s {
		out[i] = Endpoint{ID: t.id, URL: t.base, Models: slices.Clone(t.models)}
	}
	return out
}

// serves reports whether t renders model ("" or no Models: any).
func (t *target) serves(model string) bool {
	return model == "" || len(t.models) == 0 || slices.Contains(t.models, model)
}

// nowNanos is the picker's clock in unix nanoseconds.
func (p *picker) nowNanos() int64 { return p.now().UnixNano() }

// pick returns the next target serving model whose route r is not passed
// over, else the next one serving model (then every one serving it is
// passed over), or nil when there is none. Every target looked at advances
// the cursor.
func (p *picker) pick(model string, r route) *target {
	if p.fixed != nil {
		return p.fixed
	}
	s := p.snap.Load()
	if s == nil || len(*s) == 0 {
		return nil
	}
	ts := *s
	now := p.nowNanos()
	var benched *target
	for range ts {
		t := ts[(p.cursor.Add(1)-1)%uint64(len(ts))]
		if !t.serves(model) {
			continue
		}
		if !t.st.benched(r, now) {
			return t
		}
		if benched == nil {
			benched = t
		}
	}
	return benched
}

// pickFree returns the first target after the cursor, other than not, on
// which a render slot is free and fewer than below renders are in flight
// and whose route r is not passed over, and takes that slot; nil when there
// is none. Every target looked at advances the cursor, as in pickExcluding.
func (p *picker) pickFree(not *target, below int, model string, r route) *target {
	if p.fixed != nil {
		return nil
	}
	s := p.snap.Load()
	if s == nil {
		return nil
	}
	ts := *s
	n := uint64(len(ts))
	now := p.nowNanos()
	for range ts {
		t := ts[(p.cursor.Add(1)-1)%n]
		if t.base != not.base && t.serves(model) && !t.st.benched(r, now) && t.st.gate.tryAcquireBelow(below) {
			return t
		}
	}
	return nil
}

// lookup returns the target with the given ID, nil when there is none.
func (p *picker) lookup(id string) *target {
	if p.fixed != nil {
		if p.fixed.id == id {
			return p.fixed
		}
		return nil
	}
	s := p.snap.Load()
	if s == nil {
		return nil
	}
	ts := *s
	i, ok := slices.BinarySearchFunc(ts, id, func(t *target, id string) int { return strings.Compare(t.id, id) })
	if !ok {
		return nil
	}
	return ts[i]
}

// hasOther reports whether a target other than not's URL serves model with
// route r not passed over: whether a failed attempt on not could be retried
// elsewhere (what pickExcluding would find), without moving the cursor.
func (p *picker) hasOther(not *target, model string, r route) bool {
	if p.fixed != nil {
		return false
	}
	s := p.snap.Load()
	if s == nil {
		return false
	}
	now := p.nowNanos()
	for _, t := range *s {
		if t.base != not.base && t.serves(model) && !t.st.benched(r, now) {
			return true
		}
	}
	return false
}

// pickExcluding returns the next target whose URL differs from not's and
// whose route r is not passed over, or nil when there is none (a fixed URL,
// or a snapshot without another such URL). Every target looked at advances
// the cursor.
func (p *picker) pickExcluding(not *target, model string, r route) *target {
	if p.fixed != nil {
		return nil
	}
	s := p.snap.Load()
	if s == nil {
		return nil
	}
	ts := *s
	n := uint64(len(ts))
	now := p.nowNanos()
	for range ts {
		t := ts[(p.cursor.Add(1)-1)%n]
		if t.base != not.base && t.serves(model) && !t.st.benched(r, now) {
			return t
		}
	}
	return nil
}
