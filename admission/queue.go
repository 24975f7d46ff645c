package admission

import (
	"cmp"
	"container/heap"
	"context"
	"math"
	"slices"
	"time"

	"github.com/kvroute/kvroute"
)

// waiter is one queued request.
type waiter struct {
	eps      []kvroute.Endpoint // the caller's candidates (valid while Admit blocks)
	band     *band
	flow     *flow
	cost     int64 // prompt tokens (estimated), deficit round robin's cost
	bytes    int64 // estimated prompt bytes, counted against MaxQueuedBytes
	seq      uint64
	enqueued time.Time
	deadline time.Time
	idx      int        // index in flow.items; -1 once out of the queue
	claimed  string     // the endpoint its release claimed, once released
	done     chan error // receives the outcome once (buffered)
	// ctx is its caller's context: its claim, once released, goes when
	// it ends (claimLocked).
	ctx context.Context
}

// flow is one fairness ID's requests within a band, ordered by the
// configured Ordering.
type flow struct {
	key     string
	items   waiters
	deficit int64
}

// waiters is a flow's heap: FCFS by sequence, or earliest deadline first.
type waiters struct {
	w   []*waiter
	edf bool
}

// Len, Less, Swap, Push and Pop make waiters a container/heap; each
// waiter keeps its index so that a cancelled one is removed in O(log n).
func (h *waiters) Len() int { return len(h.w) }

// Less orders by deadline (earliest deadline first) or by arrival.
func (h *waiters) Less(i, j int) bool {
	a, b := h.w[i], h.w[j]
	if h.edf && !a.deadline.Equal(b.deadline) {
		return a.deadline.Before(b.deadline)
	}
	return a.seq < b.seq
}

// Swap swaps two waiters and their indices.
func (h *waiters) Swap(i, j int) {
	h.w[i], h.w[j] = h.w[j], h.w[i]
	h.w[i].idx, h.w[j].idx = i, j
}

// Push appends a waiter (container/heap's half of heap.Push).
func (h *waiters) Push(x any) {
	w := x.(*waiter)
	w.idx = len(h.w)
	h.w = append(h.w, w)
}

// Pop removes the last waiter (container/heap's half of heap.Pop).
func (h *waiters) Pop() any {
	n := len(h.w) - 1
	w := h.w[n]
	h.w[n] = nil
	h.w = h.w[:n]
	w.idx = -1
	return w
}

// band is one priority's queue: its flows in a ring, served in turn.
type band struct {
	priority int
	flows    map[string]*flow
	ring     []*flow
	cursor   int
	last     *flow // the flow round robin served last, while it is in the ring
	n        int   // queued requests
	bytes    int64 // their estimated bytes
	// wants counts, by endpoint ID, the queued requests naming it among
	// their candidates: the dispatch gate keeps a lower band's requests
	// back only at the endpoints a queued request of this band may have.
	wants map[string]int
	m     bandMetrics
}

func newBand(priority int, m bandMetrics) *band {
	return &band{priority: priority, flows: make(map[string]*flow), wants: make(map[string]int), m: m}
}

// push queues w in its flow. Under round robin a flow that had nothing
// queued joins the ring at the end of the current round: after every flow
// waiting for its turn from the cursor on, so that a stream of new flows
// (new fairness IDs) cannot keep a backlogged flow from its turn; but
// before the flow served last, which has had its turn this round: joining
// behind it would let the flow just served go again first whenever the
// cursor had wrapped (always, with one other flow), so a flow that empties
// often (the smaller of two tenants) would lose a turn each time it came
// back. Under deficit round robin it joins at the ring's end.
func (b *band) push(w *waiter, key string, edf, drr bool) {
	f := b.flows[key]
	if f == nil {
		f = &flow{key: key, items: waiters{edf: edf}}
		b.flows[key] = f
		if drr {
			b.ring = append(b.ring, f)
		} else {
			b.join(f)
		}
	}
	w.band, w.flow = b, f
	heap.Push(&f.items, w)
	for _, ep := range w.eps {
		b.wants[ep.ID]++
	}
	b.n++
	b.bytes += w.bytes
	b.m.size.Set(float64(b.n))
	b.m.bytes.Set(float64(b.bytes))
}

// join inserts the new flow f into the round robin ring at the end of the
// current round (see push) and keeps the cursor on the flow whose turn is
// next.
func (b *band) join(f *flow) {
	n := len(b.ring)
	if n == 0 {
		b.ring, b.cursor = append(b.ring, f), 0
		return
	}
	// The turns run ring[cursor], ring[cursor+1], ..., ring[cursor-1]; the
	// flow served last, while it is in the ring, is ring[cursor-1].
	if p := (b.cursor + n - 1) % n; b.ring[p] == b.last {
		b.ring = slices.Insert(b.ring, p, f) // just before the flow served last
		if b.cursor > p {
			b.cursor++
		} // else the cursor had wrapped (p is the ring's end) or f is the only other flow (n == 1): f goes next
		return
	}
	b.ring = slices.Insert(b.ring, b.cursor, f) // last in turn
	b.cursor++
}

// remove takes w out of the queue; an emptied flow leaves the ring and
// loses its deficit.
func (b *band) remove(w *waiter) {
	f := w.flow
	heap.Remove(&f.items, w.idx)
	w.idx = -1
	for _, ep := range w.eps {
		if b.wants[ep.ID]--; b.wants[ep.ID] <= 0 {
			delete(b.wants, ep.ID)
		}
	}
	b.n--
	b.bytes -= w.bytes
	b.m.size.Set(float64(b.n))
	b.m.bytes.Set(float64(b.bytes))
	if f.items.Len() > 0 {
		return
	}
	delete(b.flows, f.key)
	if b.last == f {
		b.last = nil
	}
	for i, x := range b.ring {
		if x == f {
			b.ring = append(b.ring[:i], b.ring[i+1:]...)
			if b.cursor > i {
				b.cursor--
			}
			break
		}
	}
	if b.cursor >= len(b.ring) {
		b.cursor = 0
	}
}

// next returns the band's next request to dispatch among the flows whose
// head request has a free candidate (free returns the index of one, or -1),
// with that index, or nil. Flows take turns: with drr each gets quantum
// prompt tokens per round and spends them on its requests' costs; without,
// each gets one request per turn.
func (b *band) next(free func(*waiter) int, drr bool, quantum int64) (*waiter, int) {
	n := len(b.ring)
	if n == 0 {
		return nil, -1
	}
	if !drr {
		for i := range n {
			k := (b.cursor + i) % n
			w := b.ring[k].items.w[0]
			if ep := free(w); ep >= 0 {
				b.cursor, b.last = (k+1)%n, b.ring[k]
				return w, ep
			}
		}
		return nil, -1
	}
	for {
		var short int64 = -1 // the fewest tokens a dispatchable flow lacks
		for i := range n {
			k := (b.cursor + i) % n
			f := b.ring[k]
			w := f.items.w[0]
			ep := free(w)
			if ep < 0 {
				continue
			}
			if f.deficit >= w.cost {
				f.deficit -= w.cost
				b.cursor = k
				return w, ep
			}
			if lack := w.cost - f.deficit; short < 0 || lack < short {
				short = lack
			}
		}
		if short < 0 {
			return nil, -1
		}
		// No dispatchable flow can afford its head: give every flow the
		// rounds of quantum the closest one needs, and move the turn on.
		// The grant and the deficits saturate at math.MaxInt64 rather than
		// wrap: a quantum near it would otherwise grant nothing or make a
		// deficit negative, and this loop would never end.
		grant := quantum
		if short > quantum {
			rounds := short / quantum
			if short%quantum != 0 {
				rounds++
			}
			grant = rounds * quantum // < short + quantum <= 2 × short: no overflow
		}
		for _, f := range b.ring {
			if free(f.items.w[0]) >= 0 {
				f.deficit += min(grant, math.MaxInt64-f.deficit)
			}
		}
		b.cursor = (b.cursor + 1) % n
	}
}

// byAge returns the band's requests, the longest-queued first.
func (b *band) byAge() []*waiter {
	all := make([]*waiter, 0, b.n)
	for _, f := range b.ring {
		all = append(all, f.items.w...)
	}
	slices.SortFunc(all, func(x, y *waiter) int { return cmp.Compare(x.seq, y.seq) })
	return all
}

// oldest returns the band's longest-queued request, or nil.
func (b *band) oldest() *waiter {
	var o *waiter
	for _, f := range b.ring {
		for _, w := range f.items.w {
			if o == nil || w.seq < o.seq {
				o = w
			}
		}
	}
	return o
}
