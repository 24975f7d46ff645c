package kvindex

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

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

// TestEngTablesSharingAgainstReference drives three tables over one pool
// with random puts (each new entry offered to another table, as the index
// does for a block another endpoint holds), deletes and evictions, and
// compares each with its own Go map plus ordered list: sharing never
// changes what a table resolves or its order, and the pool holds exactly
// the pairs two or more tables refer to.
func TestEngTablesSharingAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var bytes atomic.Int64
	pool := newEngPool(&bytes)
	type model struct {
		tab   *engTable
		ref   map[uint64]Key
		order []uint64
	}
	ms := make([]*model, 3)
	for i := range ms {
		ms[i] = &model{tab: newEngTable(rng.Uint64(), pool), ref: map[uint64]Key{}}
	}
	forget := func(m *model, h uint64) {
		delete(m.ref, h)
		for i, x := range m.order {
			if x == h {
				m.order = append(m.order[:i], m.order[i+1:]...)
				return
			}
		}
	}
	check := func() {
		refs := map[uint32]int{}
		for _, m := range ms {
			require.Equal(t, len(m.ref), m.tab.Len())
			var got []uint64
			m.tab.Each(func(h uint64, k Key) {
				require.Equal(t, m.ref[h], k)
				got = append(got, h)
			})
			require.Equal(t, len(m.order), len(got))
			if len(m.order) > 0 {
				require.Equal(t, m.order, got)
			}
			shared, units := 0, 0
			m.tab.eachRaw(func(pos uint32) {
				units += int(m.tab.size(pos))
				if !m.tab.isPriv(pos) {
					refs[*m.tab.unit(pos)]++
					shared++
				}
			})
			require.Equal(t, m.tab.Len()-shared, m.tab.Private())
			require.Equal(t, units, m.tab.units)
		}
		require.Equal(t, len(refs), pool.Len())
		for r, n := range refs {
			require.Equal(t, uint32(n), pool.dir[r>>poolChunkBits].rc[r&(poolChunkSize-1)])
		}
		require.Equal(t, int64(len(refs))*costSharedEntry, bytes.Load())
	}
	for step := 0; step < 60000; step++ {
		m := ms[rng.IntN(len(ms))]
		// Few hashes and keys, so that tables often hold the same pairs.
		h := rng.Uint64N(2000) * 0x10000
		switch op := rng.IntN(10); {
		case op < 5:
			k := Key(rng.Uint64N(3) + 1)
			old, existed := m.tab.Put(h, k)
			rk, rexisted := m.ref[h]
			require.Equal(t, rexisted, existed)
			require.Equal(t, rk, old)
			if !rexisted {
				m.order = append(m.order, h)
			}
			m.ref[h] = k
			if o := ms[rng.IntN(len(ms))]; o != m && (!existed || old != k) {
				_, same := o.ref[h]
				shared := m.tab.adopt(h, o.tab)
				require.Equal(t, same && o.ref[h] == k, shared)
			}
		case op < 8:
			_, present := m.ref[h]
			require.Equal(t, present, m.tab.Delete(h))
			forget(m, h)
		case op < 9:
			h, k, ok := m.tab.PopOldest()
			require.Equal(t, len(m.order) > 0, ok)
			if ok {
				require.Equal(t, m.order[0], h)
				require.Equal(t, m.ref[h], k)
				forget(m, h)
			}
		default:
			k, ok := m.tab.Get(h)
			rk, rok := m.ref[h]
			require.Equal(t, rok, ok)
			require.Equal(t, rk, k)
		}
		if step%3000 == 0 {
			check()
		}
	}
	check()
	// Reset one table, drain the others: the pool gives everything back.
	ms[0].tab.Reset()
	ms[0].ref, ms[0].order = map[uint64]Key{}, nil
	check()
	for _, m := range ms[1:] {
		for m.tab.Len() > 0 {
			_, _, ok := m.tab.PopOldest()
			require.True(t, ok)
		}
		m.ref, m.order = map[uint64]Key{}, nil
	}
	check()
	require.Zero(t, pool.Len())
	require.Zero(t, bytes.Load())
	require.Zero(t, pool.heapBytes()-int(unsafe.Sizeof(*pool.dir)))
}

// A table whose every entry another table adopts gives back the units its
// private records no longer need, and keeps its order.
func TestEngTableGivesBackPrivateChunksWhenAdopted(t *testing.T) {
	pool := testPool()
	first, second := newEngTable(1, pool), newEngTable(2, pool)
	const n = 10 * unitChunk
	for h := uint64(1); h <= n; h++ {
		first.Put(h, Key(h))
	}
	require.Len(t, first.chunks, n*privUnits/unitChunk)
	for h := uint64(1); h <= n; h++ {
		second.Put(h, Key(h))
		require.True(t, second.adopt(h, first))
	}
	require.Zero(t, first.Private())
	require.Zero(t, second.Private())
	require.LessOrEqual(t, len(first.chunks), 2*n/unitChunk+2) // compacted: at most half dead
	require.Equal(t, n, pool.Len())
	want := uint64(1)
	first.Each(func(h uint64, k Key) {
		require.Equal(t, want, h)
		require.Equal(t, Key(h), k)
		want++
	})
	require.Equal(t, uint64(n+1), want)
}
