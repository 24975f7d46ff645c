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
