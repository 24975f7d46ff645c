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
	var single memberBuf
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
	// Spread keys and three crowds sharing a home slot, so that probes run
	// long, inserts move blocks out of home slots and tombstones sit inside
	// clusters.
	pool := make([]Key, 0, keys+3*30)
	for i := uint64(0); i < keys; i++ {
		pool = append(pool, Key(i*0x9E3779B97F4A7C15))
	}
	for c := 0; c < 3; c++ {
		pool = append(pool, crowdKeys(m, 30, rng)...)
	}
	for op := 0; op < 200_000; op++ {
		k := pool[rng.IntN(len(pool))]
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
	crowd := crowdKeys(m, 40, rand.New(rand.NewPCG(1, 1)))
	key := func(i uint64) Key {
		if i < uint64(len(crowd)) {
			return crowd[i] // sharing a home slot: moved by inserts
		}
		return Key(i*0x9E3779B97F4A7C15 + 1)
	}
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

// TestBlockMapHandleForms checks both forms of a member-array handle: the
// short one that keeps the header in the slot (up to 127 standard and 255
// other memberships, offsets below 2^22 - 1) and the long one for the rest,
// through the map (values of 2 … 400 holders, standard or not) and directly
// (every count at its limit, offsets at the limit).
func TestBlockMapHandleForms(t *testing.T) {
	m := newBlockMap(7)
	sizes := []int{2, 3, 127, 128, 255, 256, 300, 382, 383, 400}
	for i, n := range sizes {
		key := Key(uint64(i+1) * 0x9E3779B97F4A7C15)
		var v blockVal
		for j := 0; j < n; j++ {
			mem := bmMember(key, j)
			switch {
			case n == 300 && j%3 != 0, n >= 382 && j >= 127:
				// 200 of 300 not standard (short); 127 standard and
				// 255, 256 or 273 others (short, long, long)
				mem |= 1 << (tierShift + 1) // cpu too: not standard
			case n > 200 && n != 300 && j%3 == 0:
				mem |= 1 << (tierShift + 1)
			}
			v = v.with(-1, mem)
		}
		m.Compute(key, func(blockVal, bool) (blockVal, bool) { return v, false })
		got, ok := m.Load(key)
		require.True(t, ok)
		require.Equal(t, v.one, got.one, "n=%d", n)
		std, rest := got.split(new(memberBuf))
		wstd, wrest := v.split(new(memberBuf))
		require.Equal(t, wstd, std)
		require.Equal(t, wrest, rest)
		require.Equal(t, v.stdMask(), got.stdMask())
		sh, h := m.locate(key)
		tb := sh.tab.Load()
		at, _ := tb.find(key, h)
		val := tb.slots[at].val
		nStd := int(v.one >> hdrStdShift & hdrStdMask)
		require.Equal(t, nStd <= 127 && n-nStd <= 255, val&shortBit != 0, "n=%d std=%d", n, nStd)
		if val&shortBit != 0 {
			require.Equal(t, n-nStd, int(val>>48&0xff), "n=%d: non-standard count in a short handle", n)
		}
	}
	// Removing members one by one keeps every value consistent, across
	// rebuilds (garbage compaction moves the arrays).
	for i, n := range sizes {
		key := Key(uint64(i+1) * 0x9E3779B97F4A7C15)
		for k := n; k > 1; k-- {
			m.Compute(key, func(v blockVal, _ bool) (blockVal, bool) { return v.with(0, 0), false })
			got, ok := m.Load(key)
			require.True(t, ok)
			require.Equal(t, k-1, got.count())
		}
	}
	var tb blockTable
	tb.arena = make([]uint64, 8)
	words := []uint64{0b11, 5, 6}
	hdr := uint64(2) | 2<<hdrStdShift | hdrNarrow
	v := tb.putArray(hdr, words)
	require.True(t, isHandle(v))
	require.NotZero(t, v&shortBit)
	gh, off := tb.arrayAt(v)
	require.Equal(t, hdr, gh)
	require.Equal(t, words, tb.arena[off:off+3])
	require.Equal(t, 3, tb.arrayWords(v))
	// At the offset limit the short form is refused; it is never tombVal.
	_, ok := shortHandle(shortOffLimit-1, hdr)
	require.False(t, ok)
	sv, ok := shortHandle(shortOffLimit-2, uint64(255)|127<<hdrStdShift|hdrNarrow)
	require.True(t, ok)
	require.NotEqual(t, uint64(tombVal), sv)
	// Every count at its limits round-trips, narrow or not; beyond them the
	// short form is refused.
	for _, c := range []struct {
		n, std uint64
		short  bool
	}{{2, 0, true}, {2, 2, true}, {127, 127, true}, {382, 127, true}, {255, 0, true},
		{256, 0, false}, {128, 128, false}, {383, 127, false}, {130, 1, true}} {
		for _, narrow := range []uint64{0, hdrNarrow} {
			h := c.n | c.std<<hdrStdShift | narrow
			for _, off := range []int{0, 1, 12345, shortOffLimit - 2} {
				sv, ok := shortHandle(off, h)
				require.Equal(t, c.short, ok, "n=%d std=%d", c.n, c.std)
				if !ok {
					continue
				}
				require.True(t, isHandle(sv))
				require.NotEqual(t, uint64(tombVal), sv)
				gh, goff := tb.arrayAt(sv)
				require.Equal(t, h, gh, "n=%d std=%d narrow=%x off=%d", c.n, c.std, narrow, off)
				require.Equal(t, off, goff)
				fast := c.n == c.std && narrow != 0
				require.Equal(t, fast, sv&shortFast == shortBit|shortNarrow, "n=%d std=%d narrow=%x", c.n, c.std, narrow)
			}
		}
	}
}

// shardKeys returns n keys of m that fall in shard 0.
func shardKeys(m *blockMap, n int) []Key {
	var keys []Key
	for i := uint64(1); len(keys) < n; i++ {
		k := Key(i * 0x9E3779B97F4A7C15)
		if sh, _ := m.locate(k); sh == &m.shards[0] {
			keys = append(keys, k)
		}
	}
	return keys
}

// A table grows, when inserts make it 13/16 full, to 5/8 full (any
// multiple of minSlots slots), so that one growing stays between those
// loads; an arena rebuild keeps the slot count while the slots are between
// 1/2 and 3/4 full, so that blocks gaining and losing holders (rewriting
// their member arrays, and rebuilding for the arena often) do not move the
// slot count about.
func TestBlockMapSlotCounts(t *testing.T) {
	std := func(id uint32) uint64 { return uint64(id) | stdPattern<<24 }
	add := func(m *blockMap, k Key, id uint32) {
		m.Compute(k, func(v blockVal, _ bool) (blockVal, bool) { return v.with(-1, std(id)), false })
	}
	m := newBlockMap(3)
	keys := shardKeys(m, 3000)
	grew := 0
	for i, k := range keys {
		before := len(m.shards[0].tab.Load().slots)
		add(m, k, 1)
		tb := m.shards[0].tab.Load()
		require.Zero(t, len(tb.slots)%minSlots)
		require.LessOrEqual(t, tb.live*16, len(tb.slots)*13, "%d blocks", i+1)
		if len(tb.slots) != before {
			grew++
			require.Equal(t, slotsFor(tb.live), len(tb.slots))
		}
		if tb.live >= 64 {
			require.GreaterOrEqual(t, tb.live*8, len(tb.slots)*5-8*minSlots, "%d blocks in %d slots", tb.live, len(tb.slots))
		}
	}
	require.Greater(t, grew, 10, "growing by 13/10 at a time")
	for _, k := range keys {
		v, ok := m.Load(k)
		require.True(t, ok)
		require.Equal(t, 1, v.count())
	}

	m = newBlockMap(3)
	keys = shardKeys(m, 600)
	for _, k := range keys {
		for id := uint32(1); id <= 4; id++ {
			add(m, k, id)
		}
	}
	tb := m.shards[0].tab.Load()
	require.Equal(t, 600, tb.live)
	n := len(tb.slots)
	require.LessOrEqual(t, 600*16, n*13)
	require.GreaterOrEqual(t, 600*4, n*2)
	v, _ := m.Load(keys[0])
	require.True(t, v.implicit())
	// Holders leaving and joining again rewrite every array, across arena
	// rebuilds, without changing the slot count.
	for round := 0; round < 3; round++ {
		for _, k := range keys {
			m.Compute(k, func(v blockVal, _ bool) (blockVal, bool) { return v.with(0, 0), false })
			add(m, k, 1)
		}
		require.Equal(t, n, len(m.shards[0].tab.Load().slots), "round %d", round)
	}
	for _, k := range keys {
		v, ok := m.Load(k)
		require.True(t, ok)
		require.Equal(t, 4, v.count())
	}
}
