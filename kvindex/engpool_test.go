package kvindex

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/stretchr/testify/require"
)

// Writers for four endpoints storing, removing and clearing the same chains
// under the same engine hashes at once, so that entries are shared, adopted
// from busy endpoints and let go concurrently (run with -race): every
// endpoint resolves exactly its own hashes throughout, the accounting stays
// exact, and the pool is empty when the endpoints are.
func TestConcurrentHoldersShareEngineHashEntries(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newTestIndex(t, Config{MaxBlocksPerEndpoint: 24})
	const endpoints, rounds = 4, 200
	prompts := [][]uint32{seq(1, 8*testBS), seq(1000, 8*testBS), seq(2000, 8*testBS)}
	var wg sync.WaitGroup
	for w := 0; w < endpoints; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			name := fmt.Sprintf("10.9.0.%d:8000", w)
			for r := 0; r < rounds; r++ {
				p := (w + r) % len(prompts)
				base := uint64(p+1) << 20 // the same hashes on every endpoint
				if err := ix.Store(name, storeEv("m", base, prompts[p])); err != nil {
					t.Error(err)
					return
				}
				// A child only this endpoint resolves: its parent is its own
				// (unless capacity eviction just took the parent, the oldest
				// when the prompt was stored before and kept its position).
				if err := ix.Store(name, withParent(storeEv("m", base|uint64(w+1)<<10, seq(9000+w*10, testBS)), base+7)); err != nil && !errors.Is(err, ErrParentMissing) {
					t.Error(err)
					return
				}
				switch r % 7 {
				case 3:
					ix.Remove(name, []uint64{base + 1, base + 5}, "gpu", 0)
				case 6:
					ix.Clear(name)
				}
			}
		}(w)
	}
	wg.Wait()
	require.Equal(t, recountBytes(ix), ix.Stats().Bytes)
	blocks, members, _ := recount(ix)
	st := ix.Stats()
	require.Equal(t, blocks, st.Blocks)
	require.Equal(t, members, st.Memberships)
	// Each endpoint's table holds only pairs it stored: its own child
	// hashes and the prompts' hashes.
	ix.eps.Range(func(name string, ep *endpoint) bool {
		ep.mu.Lock()
		defer ep.mu.Unlock()
		var w int
		_, err := fmt.Sscanf(name, "10.9.0.%d:8000", &w)
		require.NoError(t, err)
		ep.eng.Each(func(h uint64, _ Key) {
			if low := h & (1<<20 - 1); low >= 1<<10 {
				require.Equal(t, uint64(w+1), low>>10, "%s holds another endpoint's child hash %#x", name, h)
			}
		})
		return true
	})
	for w := 0; w < endpoints; w++ {
		ix.Clear(fmt.Sprintf("10.9.0.%d:8000", w))
	}
	require.Zero(t, ix.pool.Len())
	require.Zero(t, ix.Stats().Bytes)
}
