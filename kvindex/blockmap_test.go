package kvindex

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// bmMember is membership j of a block in the block map tests: its endpoint
// ID says which key it belongs to, so a reader can tell a torn or foreign
// value from a consistent one.
func bmMember(key Key, j int) uint64 {
	m, _ := encodePairs(uint32(key%1000)+1+uint32(j)*1000, []pair{{tier: 0, group: -1, count: 1}})
	return m
}

// bmValue builds the value of key with n members (n ≥ 1).
func bmValue(key Key, n int) blockVal {
	var v blockVal
	for j := 0; j < n; j++ {
		v = v.with(-1, bmMember(key, j))
	}
	return v
}

// bmCheck reports whether v is a consistent value of key: members 0 … n-1.
func bmCheck(key Key, v blockVal) bool {
	n := v.count()
	if n == 0 {
		return false
	}
	var single [1]uint64
	seen := map[uint64]bool{}
	for _, m := range v.members(&single) {
		seen[m] = true
	}
	for j := 0; j < n; j++ {
		if !seen[bmMember(key, j)] {
			return false
		}
	}
	return len(seen) == n
}

func TestBlockMapAgainstReference(t *testing.T) {
	m := newBlockMap(7)
	ref := map[Key]int{} // key → member count
	rng := rand.New(rand.NewPCG(1, 2))
	const keys = 5000
	for op := 0; op < 200_000; op++ {
		k := Key(rng.Uint64N(keys) * 0x9E3779B97F4A7C15)
		n := 0
		if rng.IntN(3) > 0 {
			n = 1 + rng.IntN(6)
		}
		m.Compute(k, func(v blockVal, loaded bool) (blockVal, bool) {
			_, had := ref[k]
			require.Equal(t, had, loaded)
			if loaded {
				require.True(t, bmCheck(k, v))
				require.Equal(t, ref[k], v.count())
			}
			if n == 0 {
				return blockVal{}, true
			}
			return bmValue(k, n), false
		})
		if n == 0 {
			delete(ref, k)
		} else {
			ref[k] = n
		}
		if op%20_000 == 0 {
			got := 0
			m.Range(func(k Key, v blockVal) bool {
				got++
				require.Equal(t, ref[k], v.count())
				return true
			})
			require.Equal(t, len(ref), got)
		}
	}
	for k, n := range ref {
		v, ok := m.Load(k)
		require.True(t, ok)
		require.Equal(t, n, v.count())
		require.True(t, bmCheck(k, v))
	}
	absent := uint64(keys + 1)
	_, ok := m.Load(Key(absent * 0x9E3779B97F4A7C15))
	require.False(t, ok)
	// Garbage and tombstones stay bounded: the tables are at most a few
	// times the live data.
	live := 0
	for _, n := range ref {
		live += 16
		if n > 1 {
			live += 8 * (n + 1)
		}
	}
	require.Less(t, m.bytes(), 8*live+blockShards*16*minSlots)
}

func TestBlockMapConcurrentReadersSeeConsistentValues(t *testing.T) {
	// Writers churn keys through every size (inline, arrays, deletion,
	// tombstone reuse, rebuilds) while readers check that whatever they
	// load is a complete value of that key. Run under -race.
	m := newBlockMap(3)
	const keys = 2000
	key := func(i uint64) Key { return Key(i*0x9E3779B97F4A7C15 + 1) }
	var stop atomic.Bool
	var bad atomic.Int64
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for !stop.Load() {
				k := key(rng.Uint64N(keys))
				if v, ok := m.Load(k); ok && !bmCheck(k, v) {
					bad.Add(1)
				}
			}
		}(r)
	}
	var writers sync.WaitGroup
	for w := 0; w < 2; w++ {
		writers.Add(1)
		go func(w int) {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 5))
			for op := 0; op < 50_000; op++ {
				// Each writer owns half the keys, like endpoints owning
				// their memberships.
				k := key(2*rng.Uint64N(keys/2) + uint64(w))
				n := rng.IntN(5)
				m.Compute(k, func(blockVal, bool) (blockVal, bool) {
					if n == 0 {
						return blockVal{}, true
					}
					return bmValue(k, n), false
				})
			}
		}(w)
	}
	writers.Wait()
	stop.Store(true)
	wg.Wait()
	require.Zero(t, bad.Load(), "readers saw inconsistent values")
}

func TestBlockMapUnchangedValueIsNotRewritten(t *testing.T) {
	m := newBlockMap(1)
	m.Compute(5, func(blockVal, bool) (blockVal, bool) { return bmValue(5, 3), false })
	sh, _ := m.locate(5)
	used := sh.tab.Load().used
	m.Compute(5, func(v blockVal, _ bool) (blockVal, bool) { return v, false })
	require.Equal(t, used, sh.tab.Load().used)
	// A compute that declines to insert leaves nothing behind.
	m.Compute(6, func(v blockVal, loaded bool) (blockVal, bool) { return v, !loaded })
	_, ok := m.Load(6)
	require.False(t, ok)
}
