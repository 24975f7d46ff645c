package kvindex

import (
	"math/bits"
	"unsafe"
)

// slabChunk is the number of entries per engTable slab chunk (8 KiB).
const slabChunk = 512

// engTable maps one endpoint's engine block hashes to router keys and
// remembers the order in which hashes were first stored, for capacity
// eviction. It costs about 22 bytes per entry, against ~45 for a Go map plus
// a separate FIFO:
//
//   - entries live in an append-only slab of fixed-size chunks, in insertion
//     order (16 bytes each); removal marks them dead in a bitmap kept beside the chunks;
//   - an open-addressing index with linear probing maps a hash to its slab
//     position (4 bytes per slot; any multiple of 16 slots, so that a
//     rebuild leaves it 5/8 full and it grows at 13/16, about 5.6 bytes
//     per entry on average, where power-of-two sizes would waste up to
//     half); deletion shifts entries back, so there are no tombstones;
//   - chunks at the head that are entirely dead are released, and the slab
//     is compacted when dead entries outnumber live ones.
//
// It is not safe for concurrent use; the endpoint's mutex guards it.
type engTable struct {
	chunks []*engChunk
	dead   []uint64 // per slab position from base: bit set = removed
	base   uint32   // slab position of chunks[0][0]
	head   uint32   // position of the oldest entry that may be live
	tail   uint32   // next position to append at
	live   int      // live entries
	index  []uint32 // slab position + 1 per slot; 0 = empty
	seed   uint64
}

// engChunk is exactly 8 KiB, a Go size class (the dead bits live apart in
// engTable.dead: with them inside, a chunk would take the 9,472-byte class,
// 15 % more).
type engChunk [slabChunk]engEntry

type engEntry struct {
	hash uint64
	key  Key
}

func newEngTable(seed uint64) *engTable { return &engTable{seed: seed | 1} }

// Len returns the number of live entries.
func (t *engTable) Len() int { return t.live }

// home returns h's home slot: the top 32 bits of a mix of h, scaled to
// the index length (multiply-shift range reduction, any length).
func (t *engTable) home(h uint64) int {
	x := (h ^ t.seed) * 0x9E3779B97F4A7C15
	return int((x >> 32 * uint64(len(t.index))) >> 32)
}

// next returns the slot after i, wrapping around.
func (t *engTable) next(i int) int {
	if i++; i == len(t.index) {
		return 0
	}
	return i
}

// indexSize returns the index length for n live entries right after a
// rebuild: 5/8 full, a multiple of 16.
func indexSize(n int) int { return max(16, (n*8/5+15)&^15) }

func (t *engTable) entry(pos uint32) *engEntry {
	off := pos - t.base
	return &t.chunks[off/slabChunk][off%slabChunk]
}

// slot returns the index slot holding h, or -1.
func (t *engTable) slot(h uint64) int {
	if len(t.index) == 0 {
		return -1
	}
	for i := t.home(h); ; i = t.next(i) {
		p := t.index[i]
		if p == 0 {
			return -1
		}
		if t.entry(p-1).hash == h {
			return i
		}
	}
}

// Get returns the key stored for engine hash h.
func (t *engTable) Get(h uint64) (Key, bool) {
	i := t.slot(h)
	if i < 0 {
		return 0, false
	}
	return t.entry(t.index[i] - 1).key, true
}

// Put maps h to key. A new hash is appended as the newest entry; an existing
// one keeps its position. It returns the previous key, if any.
func (t *engTable) Put(h uint64, key Key) (old Key, existed bool) {
	if i := t.slot(h); i >= 0 {
		e := t.entry(t.index[i] - 1)
		old, e.key = e.key, key
		return old, true
	}
	if (t.live+1)*16 > len(t.index)*13 {
		t.rehash(indexSize(t.live + 1))
	}
	if t.tail == ^uint32(0) {
		t.compact() // positions exhausted: renumber from zero
	}
	t.appendEntry(h, key)
	return 0, false
}

func (t *engTable) insertIndex(h uint64, pos uint32) {
	i := t.home(h)
	for t.index[i] != 0 {
		i = t.next(i)
	}
	t.index[i] = pos + 1
}

// Delete removes h and reports whether it was present.
func (t *engTable) Delete(h uint64) bool {
	i := t.slot(h)
	if i < 0 {
		return false
	}
	pos := t.index[i] - 1
	t.removeSlot(i)
	off := pos - t.base
	t.dead[off/64] |= 1 << (off % 64)
	t.chunks[off/slabChunk][off%slabChunk] = engEntry{}
	t.live--
	t.trim()
	return true
}

// removeSlot empties index slot i, shifting later entries of its probe run
// back so that lookups never need tombstones.
func (t *engTable) removeSlot(i int) {
	for j := t.next(i); t.index[j] != 0; j = t.next(j) {
		k := t.home(t.entry(t.index[j] - 1).hash)
		// Move j back to i unless its home lies cyclically in (i, j].
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.index[i] = t.index[j]
			i = j
		}
	}
	t.index[i] = 0
}

// isDead reports whether the entry at slab position pos was removed.
func (t *engTable) isDead(pos uint32) bool {
	off := pos - t.base
	return t.dead[off/64]&(1<<(off%64)) != 0
}

// appendEntry appends (h, key) as the newest entry and indexes it. The
// index has room for it.
func (t *engTable) appendEntry(h uint64, key Key) {
	off := t.tail - t.base
	if off/slabChunk == uint32(len(t.chunks)) {
		t.chunks = append(t.chunks, new(engChunk))
		t.dead = append(t.dead, make([]uint64, slabChunk/64)...)
	}
	t.chunks[off/slabChunk][off%slabChunk] = engEntry{hash: h, key: key}
	t.insertIndex(h, t.tail)
	t.tail++
	t.live++
}

// PopOldest removes and returns the entry stored first among the live ones.
func (t *engTable) PopOldest() (h uint64, key Key, ok bool) {
	for ; t.head < t.tail; t.head++ {
		if t.isDead(t.head) {
			continue
		}
		e := *t.entry(t.head)
		t.Delete(e.hash)
		return e.hash, e.key, true
	}
	return 0, 0, false
}

// Each calls f for every live entry, oldest first.
func (t *engTable) Each(f func(h uint64, key Key)) {
	for pos := t.head; pos < t.tail; pos++ {
		if !t.isDead(pos) {
			e := t.entry(pos)
			f(e.hash, e.key)
		}
	}
}

// trim skips dead entries at the head, releases fully dead head chunks and
// compacts the slab when most of it is dead.
func (t *engTable) trim() {
	for t.head < t.tail {
		off := t.head - t.base
		w := t.dead[off/64] >> (off % 64)
		if w&1 == 0 {
			break
		}
		// Skip the run of dead entries within this word.
		t.head += min(uint32(bits.TrailingZeros64(^w)), t.tail-t.head)
		for t.head-t.base >= slabChunk {
			t.chunks[0] = nil
			t.chunks = t.chunks[1:]
			t.dead = t.dead[slabChunk/64:]
			t.base += slabChunk
		}
	}
	if t.live == 0 {
		*t = engTable{seed: t.seed}
		return
	}
	if used := int(t.tail - t.head); used > 2*t.live+slabChunk {
		t.compact()
	}
	if len(t.index) > 64 && t.live*4 < len(t.index) {
		t.rehash(indexSize(t.live))
	}
}

// compact rewrites the live entries contiguously from position 0, oldest
// first, and rebuilds the index.
func (t *engTable) compact() {
	old := *t
	*t = engTable{seed: old.seed}
	n := (old.live + slabChunk - 1) / slabChunk
	t.chunks = make([]*engChunk, 0, n)
	t.dead = make([]uint64, 0, n*slabChunk/64)
	t.index = make([]uint32, len(old.index))
	old.Each(t.appendEntry)
}

// rehash rebuilds the index with n slots.
func (t *engTable) rehash(n int) {
	t.index = make([]uint32, n)
	for pos := t.head; pos < t.tail; pos++ {
		if !t.isDead(pos) {
			t.insertIndex(t.entry(pos).hash, pos)
		}
	}
}

// bytes returns the heap the table holds (chunks, dead bits, index and the
// chunk pointers), for memory accounting in tests and benchmarks.
func (t *engTable) bytes() int {
	return len(t.chunks)*int(unsafe.Sizeof(engChunk{})) + 8*cap(t.chunks) + 8*cap(t.dead) + 4*cap(t.index)
}
