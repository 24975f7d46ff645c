package kvindex

import (
	"math/bits"
	"unsafe"
)

// unitChunk is the number of 4-byte units per engTable slab chunk (8 KiB).
const unitChunk = 2048

// privUnits is the length in units of a private record (hash and key).
const privUnits = 4

// engTable maps one endpoint's engine block hashes to router keys and
// remembers the order in which hashes were first stored, for capacity
// eviction. It holds exactly the mappings the endpoint stored itself, so
// that the endpoint resolves (as a parent, in a removal, in a tier-only
// store) only hashes it announced, whatever other endpoints or models
// announce for the same hashes.
//
// The (hash, key) pair itself is kept once per index when several
// endpoints stored the same pair — engines of one model publish the same
// engine hash for the same block — and in the endpoint's table otherwise:
//
//   - entries live in an append-only slab of 4-byte units, in insertion
//     order: a private entry is a record of four units (the hash and the
//     key, 16 bytes), a shared one a single unit, the index of an entry of
//     the index's engPool that every endpoint storing the pair refers to.
//     Two bitmaps beside the slab chunks tell a private record's first
//     unit and the dead units: removal marks an entry's units dead, chunks
//     at the head that are entirely dead are released, and the slab is
//     compacted when dead units are more than a quarter of the live ones
//     (and a chunk);
//   - an open-addressing index with linear probing maps a hash to the slab
//     position of its entry (4 bytes per slot; any multiple of 16 slots, so
//     that a rebuild leaves it 5/8 full and it grows at 13/16); deletion
//     shifts entries back, so there are no tombstones. A slot also holds a
//     fingerprint of the hash above the position (posBits), so a probe
//     reads an entry — in place for a private one, in the pool for a
//     shared one — only when the fingerprint matches.
//
// A pair becomes shared when a second endpoint stores it: the index, which
// sees in the block map who else holds the block, hands the new entry to
// adopt together with another holder's table, and the two then refer to
// one pool entry (the first holder's record shrinks to one unit; its
// other three die). Per membership that costs about 23 bytes for a block
// one endpoint holds (record, index slot, bits) and about 16 for a block
// four hold (a unit, an index slot, the dead units awaiting compaction and
// the bits each, and a quarter of a 20-byte pool entry).
//
// It is not safe for concurrent use; the endpoint's mutex guards it (adopt
// needs both endpoints' mutexes).
type engTable struct {
	chunks []*[unitChunk]uint32
	dead   []uint64 // per slab unit from base: bit set = dead
	priv   []uint64 // per slab unit from base: bit set = first unit of a private record
	base   uint32   // slab position of chunks[0][0]
	head   uint32   // position of the oldest unit that may be live
	tail   uint32   // next position to append at
	live   int      // live entries
	units  int      // units of live entries
	nPriv  int      // live private entries
	index  []uint32 // per slot: fingerprint << posBits | slab position + 1; 0 = empty
	seed   uint64
	// posBits is the width of the slab positions in index slots; the
	// bits above hold a fingerprint of the hash, so that a probe reads
	// the entry only when the fingerprint matches. Positions are
	// renumbered (compact) before they outgrow it.
	posBits uint

	pool *engPool
}

type engEntry struct {
	hash uint64
	key  Key
}

// minPosBits is the least width of slab positions in index slots (64 Mi
// units), leaving 6 bits of fingerprint.
var minPosBits uint = 26

func newEngTable(seed uint64, pool *engPool) *engTable {
	return &engTable{seed: seed | 1, pool: pool, posBits: minPosBits}
}

// empty resets t to an empty table with the same seed and pool.
func (t *engTable) empty() { *t = engTable{seed: t.seed, pool: t.pool, posBits: minPosBits} }

// fp returns h's fingerprint shifted into place in an index slot: low
// bits of the mix home scales (which home's choice among fewer than 2^26
// slots hardly depends on) folded with its top bits (which depend on every
// bit of h).
func (t *engTable) fp(h uint64) uint32 {
	x := (h ^ t.seed) * 0x9E3779B97F4A7C15
	return (uint32(x>>32) ^ uint32(x>>58)) << t.posBits
}

// posOf returns the slab position an index slot holds.
func (t *engTable) posOf(slot uint32) uint32 { return slot&(1<<t.posBits-1) - 1 }

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

// unit returns the unit at slab position pos.
func (t *engTable) unit(pos uint32) *uint32 {
	off := pos - t.base
	return &t.chunks[off/unitChunk][off%unitChunk]
}

// isPriv reports whether the entry at pos is a private record.
func (t *engTable) isPriv(pos uint32) bool {
	off := pos - t.base
	return t.priv[off/64]&(1<<(off%64)) != 0
}

// isDead reports whether the unit at slab position pos is dead.
func (t *engTable) isDead(pos uint32) bool {
	off := pos - t.base
	return t.dead[off/64]&(1<<(off%64)) != 0
}

func (t *engTable) setDead(pos uint32) {
	off := pos - t.base
	t.dead[off/64] |= 1 << (off % 64)
}

// record returns the four units of the private record at pos (records never
// cross a chunk).
func (t *engTable) record(pos uint32) *[privUnits]uint32 {
	return (*[privUnits]uint32)(unsafe.Pointer(t.unit(pos)))
}

// entry returns the live entry at slab position pos.
func (t *engTable) entry(pos uint32) engEntry {
	if t.isPriv(pos) {
		r := t.record(pos)
		return engEntry{hash: uint64(r[0]) | uint64(r[1])<<32, key: Key(uint64(r[2]) | uint64(r[3])<<32)}
	}
	return *t.pool.entry(*t.unit(pos))
}

// hashAt returns the hash of the live entry at pos.
func (t *engTable) hashAt(pos uint32) uint64 {
	if t.isPriv(pos) {
		r := t.record(pos)
		return uint64(r[0]) | uint64(r[1])<<32
	}
	return t.pool.entry(*t.unit(pos)).hash
}

// slot returns the index slot holding h, or -1.
func (t *engTable) slot(h uint64) int {
	if len(t.index) == 0 {
		return -1
	}
	f := t.fp(h)
	for i := t.home(h); ; i = t.next(i) {
		p := t.index[i]
		if p == 0 {
			return -1
		}
		if (p^f)>>t.posBits == 0 && t.hashAt(t.posOf(p)) == h {
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
	return t.entry(t.posOf(t.index[i])).key, true
}

// Put maps h to key. A new hash is appended as the newest entry; an existing
// one keeps its position. It returns the previous key, if any.
func (t *engTable) Put(h uint64, key Key) (old Key, existed bool) {
	if i := t.slot(h); i >= 0 {
		pos := t.posOf(t.index[i])
		if old = t.entry(pos).key; old == key {
			return old, true
		}
		if t.isPriv(pos) {
			r := t.record(pos)
			r[2], r[3] = uint32(key), uint32(key>>32)
			return old, true
		}
		// A shared entry is one unit: the re-mapped pair takes a pool
		// entry of its own (the others keep the shared pair), so that the
		// hash keeps its position.
		if s, ok := t.pool.share(h, key, 1); ok {
			t.pool.release(*t.unit(pos))
			*t.unit(pos) = s
			return old, true
		}
		// The pool is full: re-store the hash as the newest entry.
		t.Delete(h)
		t.Put(h, key)
		return old, true
	}
	if (t.live+1)*16 > len(t.index)*13 {
		t.rehash(indexSize(t.live + 1))
	}
	if uint64(t.tail)+2*unitChunk >= 1<<t.posBits {
		t.compact() // positions exhausted: renumber from zero
	}
	off := t.tail - t.base
	if off%unitChunk > unitChunk-privUnits {
		// A record never crosses a chunk: pad to the next one.
		for ; off%unitChunk != 0; off++ {
			t.grow()
			t.setDead(t.tail)
			t.tail++
		}
	}
	t.grow()
	pos := t.tail
	r := t.record(pos)
	r[0], r[1], r[2], r[3] = uint32(h), uint32(h>>32), uint32(key), uint32(key>>32)
	off = pos - t.base
	t.priv[off/64] |= 1 << (off % 64)
	t.tail += privUnits
	t.live++
	t.units += privUnits
	t.nPriv++
	t.insertIndex(h, pos)
	return 0, false
}

// grow adds a chunk when the tail is at the end of the slab.
func (t *engTable) grow() {
	if off := t.tail - t.base; off/unitChunk == uint32(len(t.chunks)) {
		t.chunks = append(t.chunks, new([unitChunk]uint32))
		t.dead = append(t.dead, make([]uint64, unitChunk/64)...)
		t.priv = append(t.priv, make([]uint64, unitChunk/64)...)
	}
}

func (t *engTable) insertIndex(h uint64, pos uint32) {
	i := t.home(h)
	for t.index[i] != 0 {
		i = t.next(i)
	}
	t.index[i] = t.fp(h) | (pos + 1)
}

// Delete removes h and reports whether it was present.
func (t *engTable) Delete(h uint64) bool {
	i := t.slot(h)
	if i < 0 {
		return false
	}
	pos := t.posOf(t.index[i])
	t.removeSlot(i)
	n := uint32(1)
	if t.isPriv(pos) {
		n = privUnits
		off := pos - t.base
		t.priv[off/64] &^= 1 << (off % 64)
		t.nPriv--
	} else {
		t.pool.release(*t.unit(pos))
	}
	for p := pos; p < pos+n; p++ {
		*t.unit(p) = 0
		t.setDead(p)
	}
	t.live--
	t.units -= int(n)
	t.trim()
	return true
}

// removeSlot empties index slot i, shifting later entries of its probe run
// back so that lookups never need tombstones.
func (t *engTable) removeSlot(i int) {
	for j := t.next(i); t.index[j] != 0; j = t.next(j) {
		k := t.home(t.hashAt(t.posOf(t.index[j])))
		// Move j back to i unless its home lies cyclically in (i, j].
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.index[i] = t.index[j]
			i = j
		}
	}
	t.index[i] = 0
}

// next live entry at or after pos, or tail.
func (t *engTable) nextLive(pos uint32) uint32 {
	for pos < t.tail && t.isDead(pos) {
		pos++
	}
	return pos
}

// size returns the units of the live entry at pos.
func (t *engTable) size(pos uint32) uint32 {
	if t.isPriv(pos) {
		return privUnits
	}
	return 1
}

// PopOldest removes and returns the entry stored first among the live ones.
func (t *engTable) PopOldest() (h uint64, key Key, ok bool) {
	if t.head = t.nextLive(t.head); t.head == t.tail {
		return 0, 0, false
	}
	e := t.entry(t.head)
	t.Delete(e.hash)
	return e.hash, e.key, true
}

// Each calls f for every live entry, oldest first.
func (t *engTable) Each(f func(h uint64, key Key)) {
	for pos := t.nextLive(t.head); pos < t.tail; pos = t.nextLive(pos + t.size(pos)) {
		e := t.entry(pos)
		f(e.hash, e.key)
	}
}

// Reset lets go of every entry (releasing the shared ones) and empties the
// table.
func (t *engTable) Reset() {
	for pos := t.nextLive(t.head); pos < t.tail; pos = t.nextLive(pos + t.size(pos)) {
		if !t.isPriv(pos) {
			t.pool.release(*t.unit(pos))
		}
	}
	t.empty()
}

// trim skips dead units at the head, releases fully dead head chunks and
// compacts the slab when most of it is dead.
func (t *engTable) trim() {
	for t.head < t.tail {
		off := t.head - t.base
		w := t.dead[off/64] >> (off % 64)
		if w&1 == 0 {
			break
		}
		// Skip the run of dead units within this word.
		t.head += min(uint32(bits.TrailingZeros64(^w)), t.tail-t.head)
		for t.head-t.base >= unitChunk {
			t.chunks[0] = nil
			t.chunks = t.chunks[1:]
			t.dead = t.dead[unitChunk/64:]
			t.priv = t.priv[unitChunk/64:]
			t.base += unitChunk
		}
	}
	if t.live == 0 {
		t.empty()
		return
	}
	t.maybeCompact()
	if len(t.index) > 64 && t.live*4 < len(t.index) {
		t.rehash(indexSize(t.live))
	}
}

// maybeCompact compacts the slab when dead units are more than a quarter of
// the live ones (and a chunk). A first holder's record dies to one unit
// when others share it, leaving three dead units inside the slab: when the
// endpoints of a fleet take turns at storing a shared prompt first, a
// quarter of an endpoint's entries do, and with compaction only once dead
// units outnumbered the live ones their slabs never compacted (three dead
// units per four live ones, 3 B per membership).
func (t *engTable) maybeCompact() {
	if used := int(t.tail - t.head); used > t.units+t.units/4+unitChunk {
		t.compact()
	}
}

// compact rewrites the live entries contiguously from position 0, oldest
// first, and rebuilds the index.
func (t *engTable) compact() {
	old := *t
	t.empty()
	// Positions get room for four times the live units, so that churn
	// renumbers at most once per that many appends.
	t.posBits = min(32, max(minPosBits, uint(bits.Len64(uint64(4*old.units+4*unitChunk)))))
	n := (old.units + old.units/unitChunk*privUnits + unitChunk - 1) / unitChunk
	t.chunks = make([]*[unitChunk]uint32, 0, n)
	t.dead = make([]uint64, 0, n*unitChunk/64)
	t.priv = make([]uint64, 0, n*unitChunk/64)
	t.index = make([]uint32, len(old.index))
	old.eachRaw(func(pos uint32) {
		if old.isPriv(pos) {
			e := old.entry(pos)
			t.Put(e.hash, e.key)
		} else {
			t.appendShared(old.pool.entry(*old.unit(pos)).hash, *old.unit(pos))
		}
	})
}

// eachRaw calls f with the position of every live entry, oldest first.
func (t *engTable) eachRaw(f func(pos uint32)) {
	for pos := t.nextLive(t.head); pos < t.tail; pos = t.nextLive(pos + t.size(pos)) {
		f(pos)
	}
}

// rehash rebuilds the index with n slots.
func (t *engTable) rehash(n int) {
	t.index = make([]uint32, n)
	t.eachRaw(func(pos uint32) { t.insertIndex(t.hashAt(pos), pos) })
}

// bytes returns the heap the table holds (slab chunks, bitmaps, index and
// the chunk pointers; not the shared pairs, which the pool holds), for
// memory accounting in tests and benchmarks.
func (t *engTable) bytes() int {
	return len(t.chunks)*unitChunk*4 + 8*(cap(t.chunks)+cap(t.dead)+cap(t.priv)) + 4*cap(t.index)
}
