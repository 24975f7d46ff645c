package server

import (
	"sync"
	"time"

	"github.com/kvroute/kvroute/simengine"
	"github.com/prometheus/client_golang/prometheus"
)

// lease is a finished prefill whose blocks a decoder may read.
type lease struct {
	req     simengine.Request
	engID   simengine.ReqID // the engine request holding the blocks (HoldKV)
	blocks  []uint64
	expires time.Time
}

// leaseTable is a prefiller's readable requests: bounded in count (oldest
// dropped), expired lazily (no goroutine). Its mutex guards everything.
type leaseTable struct {
	mu      sync.Mutex
	ttl     time.Duration
	max     int
	now     func() time.Time
	byID    map[string]lease
	order   []string // insertion order; may hold ids already taken
	held    prometheus.Gauge
	dropped *prometheus.CounterVec
	// release frees a lease's held blocks (Engine.ReleaseKV) when it is
	// taken or dropped; called with mu held (the engine never calls back).
	release func(lease)
}

func (t *leaseTable) add(id string, l lease) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.expireLocked(now)
	for len(t.byID) >= t.max && len(t.order) > 0 {
		old := t.order[0]
		t.order = t.order[1:]
		if l, ok := t.byID[old]; ok {
			delete(t.byID, old)
			t.release(l)
			t.dropped.WithLabelValues("capacity").Inc()
		}
	}
	l.expires = now.Add(t.ttl)
	t.byID[id] = l
	t.order = append(t.order, id)
	if len(t.order) > 2*t.max+64 { // ids read out of order: keep the live ones
		live := t.order[:0]
		for _, x := range t.order {
			if _, ok := t.byID[x]; ok {
				live = append(live, x)
			}
		}
		t.order = live
	}
	t.held.Set(float64(len(t.byID)))
}

// sweep drops expired leases (and frees their blocks) now.
func (t *leaseTable) sweep() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(t.now())
}

// take removes and returns a lease; the caller releases its blocks.
func (t *leaseTable) take(id string) (lease, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(t.now())
	l, ok := t.byID[id]
	if ok {
		delete(t.byID, id)
		t.held.Set(float64(len(t.byID)))
	}
	return l, ok
}

// expireLocked drops expired leases from the front (insertion order is
// expiry order: one TTL) and compacts ids already taken.
func (t *leaseTable) expireLocked(now time.Time) {
	for len(t.order) > 0 {
		l, ok := t.byID[t.order[0]]
		if ok && now.Before(l.expires) {
			break
		}
		if ok {
			delete(t.byID, t.order[0])
			t.release(l)
			t.dropped.WithLabelValues("expired").Inc()
		}
		t.order = t.order[1:]
	}
	if cap(t.order) > 64 && len(t.order) < cap(t.order)/4 {
		t.order = append([]string(nil), t.order...)
	}
	t.held.Set(float64(len(t.byID)))
}
