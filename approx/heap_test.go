//go:build !race

package approx

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
)

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The accounted bytes cover what the Go heap holds for the entries, at
// sizes that fall just after and just before the map's growth steps.
func TestAccountedBytesCoverHeap(t *testing.T) {
	for _, n := range []int{1800, 3600, 7200, 28700, 29000, 115000, 230000, 460000} {
		ix, err := New(Config{Enabled: true, MaxBytes: 1 << 30, Capacity: Capacity{GPUBlocks: 1 << 24, BlockSize: 64}}, Options{})
		require.NoError(t, err)
		keys := make([]kvindex.Key, 1000)
		before := heapInUse() // the index's fixed cost is not per entry
		for done := 0; done < n; done += len(keys) {
			for i := range keys {
				keys[i] = kvindex.Key(done + i + 1)
			}
			ix.Record("e", keys[:min(len(keys), n-done)])
		}
		used := heapInUse() - before
		st := ix.Stats()
		t.Logf("%d entries: heap %d B (%.1f B/entry), accounted %d B", st.Entries, used, float64(used)/float64(st.Entries), st.Bytes)
		require.Equal(t, n, st.Entries)
		require.LessOrEqual(t, int64(used), st.Bytes, "%d entries", n)
		runtime.KeepAlive(ix)
		runtime.KeepAlive(keys)
	}
}
