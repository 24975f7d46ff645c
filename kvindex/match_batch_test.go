package kvindex

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPresBatchAgreesWithLoad checks presBatch against Load on a map of
// values in every shape (one membership standard or not, member arrays
// narrow or wide, short or long form, standard only or mixed, with
// collisions and tombstones; standard-only arrays in the implicit form and
// in the full one) under per-ID bit tables of both kinds (bits
// relative to a base ID, bits per candidate) and tables shorter than the
// IDs: it finds the same leading present keys as loadBatch; a block it
// computes itself has exactly the candidates Load's memberships give; any
// other block is handed back as Load's value.
func TestPresBatchAgreesWithLoad(t *testing.T) {
	m := newBlockMap(5)
	rng := rand.New(rand.NewPCG(7, 8))
	const keys = 4000
	key := func(i uint64) Key { return Key(i*0x9E3779B97F4A7C15 + 1) }
	member := func(id uint32) uint64 {
		switch r := rng.IntN(10); {
		case r < 6:
			return uint64(id) | stdPattern<<24 // confirmed, GPU only
		case r < 8:
			m, _ := encodePairs(id, []pair{{tier: 0, group: 1, count: 1}}) // the same in group 1
			return m
		case r < 9:
			return uint64(id) | 3<<tierShift // GPU and CPU
		default:
			return makeSpec(id, 1<<40)
		}
	}
	for op := 0; op < 12_000; op++ {
		k := key(rng.Uint64N(keys))
		if rng.IntN(8) == 0 {
			m.Compute(k, func(blockVal, bool) (blockVal, bool) { return blockVal{}, true })
			continue
		}
		n := []int{1, 1, 2, 3, 8, 40, 64, 130, 300}[rng.IntN(9)]
		lo := uint32([]int{1, 30, 90, 200}[rng.IntN(4)])
		span := uint32([]int{8, 63, 64, 120, 400}[rng.IntN(5)])
		var v blockVal
		seen := map[uint32]bool{}
		for len(seen) < n && len(seen) < int(span) {
			id := lo + uint32(rng.IntN(int(span)))
			if seen[id] {
				continue
			}
			seen[id] = true
			v = v.with(-1, member(id))
		}
		m.Compute(k, func(blockVal, bool) (blockVal, bool) { return v, false })
	}
	all := make([]Key, keys+100) // the last 100 were never stored
	for i := range all {
		all[i] = key(uint64(i))
	}
	var fastOne, fastArray, fastImplicit, slowBlocks int
	for _, tc := range []struct {
		rel     bool
		relBase uint32
		size    int // per-ID table entries (the last one the zero sentinel)
	}{{true, 1, 700}, {true, 40, 700}, {true, 100, 700}, {true, 230, 700}, {false, 0, 700}, {true, 60, 100}, {false, 0, 150}} {
		bit := make([]uint64, tc.size)
		var cands uint64
		for id := 1; id < tc.size-1; id++ {
			if rng.IntN(3) == 0 {
				continue // not a candidate
			}
			switch {
			case tc.rel && uint32(id) >= tc.relBase && uint32(id)-tc.relBase < 64:
				bit[id] = 1 << (uint32(id) - tc.relBase)
			case !tc.rel:
				bit[id] = 1 << uint(rng.IntN(64))
			}
			cands |= bit[id]
		}
		var b chunkBatch
		var vs [probeBatch]blockVal
		for start := 0; start < len(all); start += 1 + rng.IntN(3) {
			win := all[start:min(start+probeBatch, len(all))]
			got, slow := m.presBatch(win, bit, tc.rel, tc.relBase, &b)
			require.Equal(t, m.loadBatch(win, &vs), got, "window at %d", start)
			for j := 0; j < got; j++ {
				v, ok := m.Load(win[j])
				require.True(t, ok)
				if slow&(1<<uint(j)) != 0 {
					require.Equal(t, v, b.vs[j], "key %d", start+j)
					slowBlocks++
					continue
				}
				var single memberBuf
				var want uint64
				for _, mm := range v.members(&single) {
					require.True(t, isStd(mm), "key %d: a block with a non-standard membership took the fast path", start+j)
					if id := mm & idMask; id < uint64(len(bit)) {
						want |= bit[id]
					}
				}
				require.Equal(t, want, b.pres[j]&cands, "key %d (rel %v base %d)", start+j, tc.rel, tc.relBase)
				switch {
				case v.many == nil:
					fastOne++
				case v.implicit():
					fastImplicit++
				default:
					fastArray++
				}
			}
		}
	}
	require.Greater(t, fastOne, 1000)
	require.Greater(t, fastArray, 1000)
	require.Greater(t, fastImplicit, 1000)
	require.Greater(t, slowBlocks, 1000)
}
