//go:build !race

package session

import (
	"runtime"
	"strconv"
	"testing"
)

// The race detector allocates; this file runs without it.

// A store filled to its bound takes at most EntryBytes per entry of the
// bound (the endpoint's name shared), and an openings' memo
// (Config.Derive) at most 24 bytes more, its derived key: checked at two
// sizes where the map's and the entries' growth steps leave the most
// slack (found by sweeping sizes), and at the default.
func TestEntryBytesAllocated(t *testing.T) {
	for _, n := range []int{8509, 17332, DefaultMaxEntries} {
		keys := make([]uint64, n)
		for i := range keys {
			keys[i] = Hash("s" + strconv.Itoa(i))
		}
		for _, memo := range []bool{false, true} {
			var before, after runtime.MemStats
			settle()
			runtime.ReadMemStats(&before)
			s := newStore(n, 1<<62)
			for _, k := range keys {
				v := "10.0.0.1:8000"
				if memo {
					v = "b:" + strconv.FormatUint(k, 16) // as deriveKey makes it
				}
				s.record(k, v, 1, false)
			}
			settle()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(s)
			if got := s.len(); got > n {
				t.Fatalf("a store of %d holds %d sessions", n, got)
			}
			perEntry := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
			bound := float64(EntryBytes)
			if memo {
				bound += 24
			}
			t.Logf("%d entries, memo %v: %.1f bytes each", n, memo, perEntry)
			if perEntry > bound {
				t.Errorf("a full store of %d (memo %v) takes %.1f bytes per entry, over %v", n, memo, perEntry, bound)
			}
		}
	}
}

// settle collects the garbage twice, so that what sync.Pools held, kept
// one more cycle, is gone too.
func settle() {
	runtime.GC()
	runtime.GC()
}
