package kvindex

import (
	"math/bits"
	"unsafe"
)

// Chunk sizes of an engTable: 8 KiB each, a Go size class.
const (
	slabChunk = 512  // private entries per chunk
	refChunk  = 2048 // references per chunk
)

// engTable maps one endpoint's engine block hashes to router keys and
// remembers the order in which hashes were first stored, for capacity
// eviction. It holds exactly the mappings the endpoint stored itself, so
// that the endpoint resolves (as a parent, in a removal, in a tier-only
// store) only hashes it announced, whatever other endpoints or models
// announce for the same hashes.
//
// The (hash, key) pair itself is kept once per index when several
// endpoints stored the same pair — engines of one model publish the same
// engine hash for the same block — and privately otherwise:
//
//   - refs, an append-only slab of 4-byte references in insertion order,
//     is the endpoint's eviction order; removal marks a reference dead in
//     a bitmap kept beside the chunks, chunks at the head that are entirely
//     dead are released, and the slab is compacted when dead references
//     outnumber live ones;
//   - a reference is either the index of a private entry (16 bytes in the
//     table's own chunks, recycled through a free list threaded through the
//     freed entries' key field) or, with sharedRef set, the index of an
//     entry of the index's engPool, referred to by every endpoint that
//     stored the pair;
//   - an open-addressing index with linear probing maps a hash to its
//     reference's slab position (4 bytes per slot; any multiple of 16
//     slots, so that a rebuild leaves it 5/8 full and it grows at 13/16);
//     deletion shifts entries back, so there are no tombstones.
//
// A pair becomes shared when a second endpoint stores it: the index, which
// sees in the block map who else holds the block, hands the new entry to
// adopt together with another holder's table, and the two then refer to
// one pool entry. Per membership that costs about 26 bytes for a block one
// endpoint holds (reference, index slot, private entry) and about 15 for a
// block four hold (reference and index slot each, and a quarter of a
// 20-byte pool entry).
//
// It is not safe for concurrent use; the endpoint's mutex guards it (adopt
// needs both endpoints' mutexes).
type engTable struct {
	refs  []*[refChunk]uint32
	dead  []uint64 // per slab position from base: bit set = removed
	base  uint32   // slab position of refs[0][0]
	head  uint32   // position of the oldest reference that may be live
	tail  uint32   // next position to append at
	live  int      // live references
	index []uint32 // slab position + 1 per slot; 0 = empty
	seed  uint64

	priv     []*engChunk // private entries
	privN    uint32      // private entries ever allocated (high-water mark)
	privFree uint32      // head of the free list + 1; 0 = empty
	nPriv    int         // live private entries

	pool *engPool
}

// engChunk is exactly 8 KiB.
type engChunk [slabChunk]engEntry

type engEntry struct {
	hash uint64
	key  Key
}

func newEngTable(seed uint64, pool *engPool) *engTable {
	return &engTable{seed: seed | 1, pool: pool}
}

// Len returns the number of live entries.
func (t *engTable) Len() int { return t.live }

// Private returns the number of live entries no other endpoint shares.
func (t *engTable) Private() int { return t.nPriv }

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

// ref returns the reference at slab position pos.
func (t *engTable) ref(pos uint32) *uint32 {
	off := pos - t.base
	return &t.refs[off/refChunk][off%refChunk]
}

// entryOf returns the entry a reference designates.
func (t *engTable) entryOf(r uint32) *engEntry {
	if r&sharedRef != 0 {
		return t.pool.entry(r &^ sharedRef)
	}
	return &t.priv[r/slabChunk][r%slabChunk]
}

// entry returns the entry at slab position pos.
func (t *engTable) entry(pos uint32) *engEntry { return t.entryOf(*t.ref(pos)) }

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
		r := t.ref(t.index[i] - 1)
		e := t.entryOf(*r)
		if old = e.key; old == key {
			return old, true
		}
		if *r&sharedRef != 0 {
			// The others keep the shared pair; this endpoint's mapping
			// becomes its own.
			t.pool.release(*r &^ sharedRef)
			*r = t.newPrivate(h, key)
		} else {
			e.key = key
		}
		return old, true
	}
	if (t.live+1)*16 > len(t.index)*13 {
		t.rehash(indexSize(t.live + 1))
	}
	if t.tail == ^uint32(0) {
		t.compact() // positions exhausted: renumber from zero
	}
	t.appendRef(h, t.newPrivate(h, key))
	return 0, false
}

// newPrivate stores (h, key) as a private entry and returns its reference.
func (t *engTable) newPrivate(h uint64, key Key) uint32 {
	var r uint32
	if t.privFree != 0 {
		r = t.privFree - 1
		t.privFree = uint32(t.priv[r/slabChunk][r%slabChunk].key)
	} else {
		r = t.privN
		if r/slabChunk == uint32(len(t.priv)) {
			t.priv = append(t.priv, new(engChunk))
		}
		t.privN++
	}
	t.priv[r/slabChunk][r%slabChunk] = engEntry{hash: h, key: key}
	t.nPriv++
	return r
}

// drop lets go of the entry reference r designates.
func (t *engTable) drop(r uint32) {
	if r&sharedRef != 0 {
		t.pool.release(r &^ sharedRef)
		return
	}
	t.priv[r/slabChunk][r%slabChunk] = engEntry{key: Key(t.privFree)}
	t.privFree = r + 1
	t.nPriv--
}

// adopt makes t's entry for h, which t just stored, refer to the same pool
// entry as o's when o stored the same key for h (sharing it first if o's
// entry is private). It reports whether t's entry is shared afterwards. o
// is another endpoint's table; both endpoints' mutexes are held.
func (t *engTable) adopt(h uint64, o *engTable) bool {
	i, j := t.slot(h), o.slot(h)
	if i < 0 || j < 0 {
		return false
	}
	tr, or := t.ref(t.index[i]-1), o.ref(o.index[j]-1)
	if *tr&sharedRef != 0 {
		return true
	}
	key := t.entryOf(*tr).key
	if o.entryOf(*or).key != key {
		return false // o maps h to other content: nothing to share
	}
	if *or&sharedRef != 0 {
		t.pool.acquire(*or &^ sharedRef)
	} else {
		s, ok := t.pool.share(h, key)
		if !ok {
			return false
		}
		o.drop(*or)
		*or = s | sharedRef
	}
	t.drop(*tr)
	*tr = *or
	// A table whose entries another endpoint adopts one by one would keep
	// its private chunks full of freed entries: compact them away.
	o.compactPrivate()
	return true
}

// compactPrivate compacts the table when most of its private entries'
// chunks are free.
func (t *engTable) compactPrivate() {
	if int(t.privN) > 2*t.nPriv+slabChunk {
		t.compact()
	}
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
	r := t.ref(pos)
	t.drop(*r)
	*r = 0
	off := pos - t.base
	t.dead[off/64] |= 1 << (off % 64)
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

// isDead reports whether the reference at slab position pos was removed.
func (t *engTable) isDead(pos uint32) bool {
	off := pos - t.base
	return t.dead[off/64]&(1<<(off%64)) != 0
}

// appendRef appends reference r (to an entry for h) as the newest and
// indexes it. The index has room for it.
func (t *engTable) appendRef(h uint64, r uint32) {
	off := t.tail - t.base
	if off/refChunk == uint32(len(t.refs)) {
		t.refs = append(t.refs, new([refChunk]uint32))
		t.dead = append(t.dead, make([]uint64, refChunk/64)...)
	}
	t.refs[off/refChunk][off%refChunk] = r
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

// Reset lets go of every entry (releasing the shared ones) and empties the
// table.
func (t *engTable) Reset() {
	for pos := t.head; pos < t.tail; pos++ {
		if !t.isDead(pos) && *t.ref(pos)&sharedRef != 0 {
			t.pool.release(*t.ref(pos) &^ sharedRef)
		}
	}
	*t = engTable{seed: t.seed, pool: t.pool}
}

// trim skips dead references at the head, releases fully dead head chunks
// and compacts the slab when most of it is dead, and the private entries
// when most of their chunks are free.
func (t *engTable) trim() {
	for t.head < t.tail {
		off := t.head - t.base
		w := t.dead[off/64] >> (off % 64)
		if w&1 == 0 {
			break
		}
		// Skip the run of dead references within this word.
		t.head += min(uint32(bits.TrailingZeros64(^w)), t.tail-t.head)
		for t.head-t.base >= refChunk {
			t.refs[0] = nil
			t.refs = t.refs[1:]
			t.dead = t.dead[refChunk/64:]
			t.base += refChunk
		}
	}
	if t.live == 0 {
		*t = engTable{seed: t.seed, pool: t.pool}
		return
	}
	if used := int(t.tail - t.head); used > 2*t.live+refChunk {
		t.compact()
	}
	t.compactPrivate()
	if len(t.index) > 64 && t.live*4 < len(t.index) {
		t.rehash(indexSize(t.live))
	}
}

// compact rewrites the live references contiguously from position 0 and the
// private entries contiguously from index 0, both oldest first, and
// rebuilds the index.
func (t *engTable) compact() {
	old := *t
	*t = engTable{seed: old.seed, pool: old.pool}
	t.refs = make([]*[refChunk]uint32, 0, (old.live+refChunk-1)/refChunk)
	t.dead = make([]uint64, 0, cap(t.refs)*refChunk/64)
	t.priv = make([]*engChunk, 0, (old.nPriv+slabChunk-1)/slabChunk)
	t.index = make([]uint32, len(old.index))
	for pos := old.head; pos < old.tail; pos++ {
		if old.isDead(pos) {
			continue
		}
		r := *old.ref(pos)
		e := old.entryOf(r)
		if r&sharedRef == 0 {
			r = t.newPrivate(e.hash, e.key)
		}
		t.appendRef(e.hash, r)
	}
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

// bytes returns the heap the table holds (reference and entry chunks, dead
// bits, index and the chunk pointers; not the shared entries, which the
// pool holds), for memory accounting in tests and benchmarks.
func (t *engTable) bytes() int {
	return len(t.refs)*refChunk*4 + len(t.priv)*int(unsafe.Sizeof(engChunk{})) +
		8*(cap(t.refs)+cap(t.priv)+cap(t.dead)) + 4*cap(t.index)
}
