package kvindex

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// testPool returns a pool of shared entries for tables under test.
func testPool() *engPool { return newEngPool(new(atomic.Int64)) }

// TestEngTableAgainstReference drives the engine table with random puts,
// deletes and evictions and compares it with a Go map plus an ordered list.
func TestEngTableAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := newEngTable(rng.Uint64(), testPool())
	ref := map[uint64]Key{}
	var order []uint64 // first-store order of live hashes
	removeOrder := func(h uint64) {
		for i, x := range order {
			if x == h {
				order = append(order[:i], order[i+1:]...)
				return
			}
		}
	}
	for step := 0; step < 60000; step++ {
		// A small hash space forces collisions, re-stores and long probe runs.
		h := rng.Uint64N(3000) * 0x10000
		switch op := rng.IntN(10); {
		case op < 5:
			k := Key(rng.Uint64())
			old, existed := tab.Put(h, k)
			rk, rexisted := ref[h]
			require.Equal(t, rexisted, existed)
			require.Equal(t, rk, old)
			if !rexisted {
				order = append(order, h)
			}
			ref[h] = k
		case op < 8:
			_, present := ref[h]
			require.Equal(t, present, tab.Delete(h))
			delete(ref, h)
			removeOrder(h)
		case op < 9:
			h, k, ok := tab.PopOldest()
			require.Equal(t, len(order) > 0, ok)
			if ok {
				require.Equal(t, order[0], h)
				require.Equal(t, ref[h], k)
				delete(ref, h)
				order = order[1:]
			}
		default:
			k, ok := tab.Get(h)
			rk, rok := ref[h]
			require.Equal(t, rok, ok)
			require.Equal(t, rk, k)
		}
		require.Equal(t, len(ref), tab.Len())
		if step%5000 == 0 {
			var got []uint64
			tab.Each(func(h uint64, k Key) {
				require.Equal(t, ref[h], k)
				got = append(got, h)
			})
			require.Equal(t, len(order), len(got))
			if len(order) > 0 {
				require.Equal(t, order, got)
			}
		}
	}
	// Drain: the slab releases its chunks.
	for tab.Len() > 0 {
		_, _, ok := tab.PopOldest()
		require.True(t, ok)
	}
	require.Empty(t, tab.chunks)
	require.Empty(t, tab.priv)
	require.Empty(t, tab.index)
}

func TestEngTableCompactsAfterChurn(t *testing.T) {
	tab := newEngTable(7, testPool())
	// One long-lived entry and heavy churn behind it: the slab must not
	// grow with the churn.
	tab.Put(1, 1)
	for i := uint64(2); i < 200000; i++ {
		tab.Put(i, Key(i))
		require.True(t, tab.Delete(i))
	}
	require.Equal(t, 1, tab.Len())
	require.LessOrEqual(t, len(tab.chunks), 3)
	require.LessOrEqual(t, len(tab.index), 64)
	k, ok := tab.Get(1)
	require.True(t, ok)
	require.Equal(t, Key(1), k)
}

func TestBlockValPartitionsStandardMemberships(t *testing.T) {
	std := func(id uint32) uint64 { m, _ := encodePairs(id, []pair{{tier: 0, group: 0, count: 1}}); return m }
	cpu := func(id uint32) uint64 { m, _ := encodePairs(id, []pair{{tier: 1, group: 0, count: 1}}); return m }
	var v blockVal
	v = v.with(-1, cpu(1))
	require.Nil(t, v.many)
	v = v.with(-1, std(2))
	v = v.with(-1, makeSpec(3, 99))
	v = v.with(-1, std(4))
	require.Equal(t, 4, v.count())
	s, rest := v.split(new(memberBuf))
	require.ElementsMatch(t, []uint64{std(2), std(4)}, s)
	require.ElementsMatch(t, []uint64{cpu(1), makeSpec(3, 99)}, rest)
	// Replacing keeps the partition; the old value is untouched.
	_, i := v.find(1)
	w := v.with(i, std(1))
	s, _ = w.split(new(memberBuf))
	require.Len(t, s, 3)
	s, _ = v.split(new(memberBuf))
	require.Len(t, s, 2)
	// Removing down to one goes back inline.
	for _, id := range []uint32{1, 2, 3} {
		_, i := w.find(id)
		w = w.with(i, 0)
	}
	require.Nil(t, w.many)
	require.Equal(t, std(4), w.one)
	_, i = w.find(4)
	require.Equal(t, blockVal{}, w.with(i, 0))
	var empty blockVal
	require.Equal(t, 0, empty.count())
}

func TestMembershipEncodingRoundTrip(t *testing.T) {
	for _, pairs := range [][]pair{
		{{0, -1, 1}},
		{{0, 2, 1}, {1, 2, 4}, {7, 2, 3}},
		{{3, 0, 2}},
	} {
		m, complex := encodePairs(12345, pairs)
		require.False(t, complex)
		require.Equal(t, uint32(12345), memberID(m))
		require.False(t, isSpec(m))
		require.ElementsMatch(t, pairs, decodePairs(nil, m, nil))
	}
	for _, pairs := range [][]pair{
		{{0, 3, 1}},            // group beyond the compact slots
		{{0, 0, 1}, {1, 1, 1}}, // two groups
		{{1, 0, 5}},            // count beyond 4
		{{0, 0, 2}},            // GPU counted (never produced, still encodable)
	} {
		_, complex := encodePairs(1, pairs)
		require.True(t, complex, "%v", pairs)
	}
	s := makeSpec(maxEndpointID, maxExpiry+10)
	require.True(t, isSpec(s))
	require.Equal(t, uint32(maxEndpointID), memberID(s))
	require.Equal(t, maxExpiry, specExpiry(s))
}

func TestBlockValStandardMask(t *testing.T) {
	std := func(id uint32) uint64 { m, _ := encodePairs(id, []pair{{tier: 0, group: 0, count: 1}}); return m }
	cpu := func(id uint32) uint64 { m, _ := encodePairs(id, []pair{{tier: 1, group: 0, count: 1}}); return m }
	var v blockVal
	for _, id := range []uint32{40, 7, 90, 12} {
		v = v.with(-1, cpu(id))
	}
	require.Zero(t, v.one&hdrNarrow, "no standard memberships, no mask")
	// Promote out of ID order: the standard part stays sorted by ID.
	for _, id := range []uint32{40, 12, 7} {
		_, i := v.find(id)
		v = v.with(i, std(id))
	}
	s, rest := v.split(new(memberBuf))
	require.Equal(t, []uint64{std(7), std(12), std(40)}, s)
	require.Equal(t, []uint64{cpu(90)}, rest)
	require.NotZero(t, v.one&hdrNarrow)
	require.Equal(t, uint64(1|1<<5|1<<33), v.stdMask(), "bits relative to ID 7")
	// A standard holder 64 IDs above the lowest makes the mask inexact.
	_, i := v.find(90)
	w := v.with(i, std(90))
	s, _ = w.split(new(memberBuf))
	require.Equal(t, []uint64{std(7), std(12), std(40), std(90)}, s)
	require.Zero(t, w.one&hdrNarrow)
	// Removing the lowest two makes it exact again, relative to ID 40.
	for _, id := range []uint32{7, 12} {
		_, i = w.find(id)
		w = w.with(i, 0)
	}
	require.NotZero(t, w.one&hdrNarrow)
	require.Equal(t, uint64(1|1<<50), w.stdMask())
}

// TestEngChunkIsASizeClass checks that a slab chunk is exactly 8 KiB, so the
// allocator wastes nothing on it (with its dead bits inside it took the
// 9,472-byte class).
func TestEngChunkIsASizeClass(t *testing.T) {
	require.Equal(t, uintptr(8192), unsafe.Sizeof([unitChunk]uint32{}))
}

// With slab positions as narrow as a few chunks, churn renumbers them
// (compact) over and over, and the table still agrees with a reference.
func TestEngTableRenumbersNarrowPositions(t *testing.T) {
	defer func(b uint) { minPosBits = b }(minPosBits)
	minPosBits = 14 // 4 chunks of units
	rng := rand.New(rand.NewPCG(5, 6))
	pool := testPool()
	tab, other := newEngTable(1, pool), newEngTable(2, pool)
	ref := map[uint64]Key{}
	var order []uint64
	renumbered, prevTail := 0, uint32(0)
	for step := 0; step < 100000; step++ {
		if len(ref) > 200 {
			// Evict oldest first: the head chunks go, positions keep growing.
			h, k, ok := tab.PopOldest()
			require.True(t, ok)
			require.Equal(t, order[0], h)
			require.Equal(t, ref[h], k)
			delete(ref, h)
			order = order[1:]
			continue
		}
		if tab.tail+1000 < prevTail {
			renumbered++
		}
		prevTail = tab.tail
		h := rng.Uint64N(300) + 1
		if _, ok := ref[h]; ok && rng.IntN(8) == 0 {
			require.True(t, tab.Delete(h))
			delete(ref, h)
			for i, x := range order {
				if x == h {
					order = append(order[:i], order[i+1:]...)
					break
				}
			}
			continue
		}
		k := Key(h)
		if _, ok := ref[h]; !ok {
			order = append(order, h)
			tab.Put(h, k)
			if h%2 == 0 { // half of them shared
				other.Put(h, k)
				require.True(t, tab.adopt(h, other))
			}
		}
		ref[h] = k
	}
	require.Equal(t, uint(14), tab.posBits)
	require.Greater(t, renumbered, 3)
	var got []uint64
	tab.Each(func(h uint64, k Key) {
		require.Equal(t, ref[h], k)
		got = append(got, h)
	})
	require.Equal(t, order, got)
	for h, k := range ref {
		g, ok := tab.Get(h)
		require.True(t, ok)
		require.Equal(t, k, g)
	}
}

// An endpoint that stores a quarter of its shared chains first (its
// records then die to one unit each when another endpoint shares them,
// leaving three dead units inside the slab) and the rest after the other
// endpoint keeps its dead units below a quarter of the live ones (and a
// chunk): before, the slab compacted only once dead units outnumbered the
// live ones, which this never reaches (three dead units per four live).
func TestEngTableCompactsDeadUnitsOfSharedRecords(t *testing.T) {
	pool := testPool()
	tab, other := newEngTable(1, pool), newEngTable(2, pool)
	const chains, chainLen = 64, 256
	for c := 0; c < chains; c++ {
		first, second := other, tab
		if c%4 == 0 {
			first, second = tab, other
		}
		for i := 0; i < chainLen; i++ {
			h := uint64(c*chainLen + i + 1)
			first.Put(h, Key(h))
		}
		for i := 0; i < chainLen; i++ {
			h := uint64(c*chainLen + i + 1)
			second.Put(h, Key(h))
			require.True(t, second.adopt(h, first))
		}
	}
	require.Equal(t, chains*chainLen, tab.Len())
	require.Zero(t, tab.Private())
	dead := int(tab.tail-tab.head) - tab.units
	require.LessOrEqual(t, dead, tab.units/4+unitChunk, "dead units against %d live", tab.units)
	for h := uint64(1); h <= chains*chainLen; h++ {
		k, ok := tab.Get(h)
		require.True(t, ok)
		require.Equal(t, Key(h), k)
	}
}
