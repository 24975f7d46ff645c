package bytebudget

import (
	"sync"
	"testing"
)

// Concurrent acquirers never take more than the limit together, and what
// they release comes back whole.
func TestBudgetNeverExceedsItsLimit(t *testing.T) {
	b := Budget{Limit: 1000}
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if b.Acquire(300) {
					mu.Lock()
					peak = max(peak, b.InUse())
					mu.Unlock()
					b.Release(300)
				}
			}
		})
	}
	wg.Wait()
	if peak > b.Limit {
		t.Fatalf("peak %d over the limit %d", peak, b.Limit)
	}
	if b.InUse() != 0 {
		t.Fatalf("%d bytes still taken", b.InUse())
	}
}

// Grow takes exactly the growth from the budget, keeps the buffer's bytes,
// and takes nothing when there is no room.
func TestGrowTakesTheGrowthOrNothing(t *testing.T) {
	b := Budget{Limit: 100}
	buf := append(make([]byte, 0, 10), "abc"...)
	grown, taken, ok := b.Grow(buf, 60)
	if !ok || taken != 50 || cap(grown) != 60 || string(grown) != "abc" || b.InUse() != 50 {
		t.Fatalf("Grow(10→60) = cap %d %q, taken %d, ok %v; in use %d", cap(grown), grown, taken, ok, b.InUse())
	}
	again, taken, ok := b.Grow(grown, 120)
	if ok || taken != 0 || cap(again) != 60 || b.InUse() != 50 {
		t.Fatalf("Grow(60→120) over the limit = cap %d, taken %d, ok %v; in use %d", cap(again), taken, ok, b.InUse())
	}
}
