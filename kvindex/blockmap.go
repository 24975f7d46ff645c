package kvindex

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// blockMap is the block map: Key → blockVal, read lock-free by Match and
// written under per-shard mutexes. It holds no Go pointers per block, so
// the garbage collector scans none of its millions of entries, and it costs
// 16 bytes per slot instead of a heap object per entry:
//
//   - each shard is an open-addressing table of (key, value) word pairs
//     with linear probing, in which a new block takes its home slot (see
//     insert); a value is either the block's only membership
//     (an endpoint ID is never 0, so its low 24 bits are never zero) or a
//     handle (low 24 bits zero) to a member array in the shard's arena;
//   - member arrays live in a pointer-free arena of uint64 words: a
//     standard-mask word (see blockVal) followed by the memberships (in the
//     implicit form, only the first: 2 words whatever the number of
//     holders), and before them a header word unless the handle itself
//     carries the header (the short form, see shortBit), written once
//     before the handle is published and never modified, so readers read
//     them without synchronisation beyond the handle's atomic load;
//   - deletion leaves a tombstone (a slot's key only changes while its value
//     is empty or a tombstone); replaced arrays become garbage in the arena;
//   - when slots or arena run out, the writer builds a new, compacted table
//     and publishes it atomically. Readers holding the old table keep a
//     consistent (slightly stale) snapshot: writers never touch a table
//     after replacing it.
//
// Readers never block: Load is a probe over atomic loads of the current
// table, which takes a slot's value when the slot's key reads as its own
// before and after it, and reads the slot again when the key changed
// meanwhile. Blocks only move forward along their
// probe, and are written at their new slot before leaving the old one, so
// a reader always finds a block that is present.
type blockMap struct {
	seed   uint64
	shards [blockShards]blockShard
}

// blockShards is the number of independently locked and resized tables.
const blockShards = 256

type blockShard struct {
	mu  sync.Mutex
	tab atomic.Pointer[blockTable]
	_   [48]byte // keep shards on separate cache lines
}

// blockTable is one shard's table. slots and arena are fixed at creation;
// the counters are the writer's (guarded by the shard's mutex).
type blockTable struct {
	slots []blockSlot
	arena []uint64 // full capacity; words [0, used) are allocated

	used    int // arena words allocated
	garbage int // arena words of replaced arrays
	live    int // slots holding a block
	tombs   int // tombstone slots
}

type blockSlot struct{ key, val uint64 }

const (
	// tombVal marks a deleted slot: a handle no arena reaches.
	tombVal = (1<<(64-idBits) - 1) << idBits
	// minSlots is a shard's smallest table; tables have a multiple of it.
	minSlots = 8
)

// homeSlot returns the home slot of a key of hash h in a table of n slots:
// the high word of the product of n and the hash without its top byte
// (which chose the shard), which spreads keys over a table of any size, not
// only a power of two, for one multiplication.
func homeSlot(h uint64, n int) uint64 {
	hi, _ := bits.Mul64(h<<8, uint64(n))
	return hi
}

// slotsFor returns the slots a rebuild gives a table of live blocks: the
// smallest multiple of minSlots that leaves it at most 5/8 full. A table
// grows when inserts make it 13/16 full, so it stays between 5/8 and
// 13/16 full as it grows (about 23 bytes of slots per block), not between
// 2/5 and 13/16 as a table kept at a power of two slots does (about 27).
func slotsFor(live int) int {
	return max(minSlots, (live*8/5+minSlots-1)/minSlots*minSlots)
}

// isHandle reports whether a non-empty slot value refers to a member array.
func isHandle(val uint64) bool { return val&idMask == 0 }

// A handle takes one of two forms. The short form keeps the member array's
// header in the slot value, so that the arena holds only the mask word and
// the memberships, or the mask word and the first membership in the
// implicit form (8 bytes less per block with several holders):
//
//	bits  0..23  zero (a handle)
//	bits 24..45  arena offset of the mask word + 1 (below shortOffLimit)
//	bit  46      hdrImplicit (the arena holds the mask and first membership)
//	bit  47      hdrNarrow
//	bits 48..55  memberships that are not standard (0 … 255)
//	bits 56..62  standard memberships (0 … 127)
//	bit  63      1: the short form
//
// Counting the non-standard memberships rather than all of them lets Match
// recognise an array of standard memberships with an exact mask (its
// common case, in either form: both start with the mask word and the first
// membership) by one AND and compare of the slot value (shortFast).
//
// The long form, for larger arrays or offsets, is (offset of the header word
// + 1) << 24 with bit 63 clear; the arena holds the header word (see
// blockVal.one), then the mask word and the memberships. A short handle is
// never tombVal (its offset field is below all ones).
const (
	shortBit      = uint64(1) << 63
	shortOffLimit = 1<<22 - 1
	shortOffMask  = 1<<22 - 1 // the offset field, after shifting by idBits
	shortImplicit = uint64(1) << 46
	shortNarrow   = uint64(1) << 47
	shortRest     = uint64(0xff) << 48
	// shortFast masks the bits of a slot value that make it a short handle
	// to a standard-only array with an exact mask: equal to shortBit |
	// shortNarrow exactly then (the membership ID and non-standard count
	// zero).
	shortFast = idMask | shortBit | shortNarrow | shortRest
)

// handleOf is the long-form slot value of the member array whose header
// word is at arena offset off (+1, so that no handle is 0, the empty slot).
func handleOf(off int) uint64 { return uint64(off+1) << idBits }

// shortHandle returns the short-form slot value of the array with header
// hdr whose mask word is at arena offset off, or false when it does not fit.
func shortHandle(off int, hdr uint64) (uint64, bool) {
	n, std := uint64(uint32(hdr)), hdr>>hdrStdShift&hdrStdMask
	if off+1 >= shortOffLimit || std > 127 || n-std > 255 {
		return 0, false
	}
	v := shortBit | uint64(off+1)<<idBits | (n-std)<<48 | std<<56
	if hdr&hdrNarrow != 0 {
		v |= shortNarrow
	}
	if hdr&hdrImplicit != 0 {
		v |= shortImplicit
	}
	return v, true
}

// arrayAt returns the header of the member array of handle val and the
// arena offset of its mask word.
func (t *blockTable) arrayAt(val uint64) (hdr uint64, maskOff int) {
	if val&shortBit != 0 {
		std := val >> 56 & 0x7f
		hdr = (val>>48&0xff + std) | std<<hdrStdShift
		if val&shortNarrow != 0 {
			hdr |= hdrNarrow
		}
		if val&shortImplicit != 0 {
			hdr |= hdrImplicit
		}
		return hdr, int(val>>idBits&shortOffMask) - 1
	}
	off := int(val>>idBits) - 1
	return t.arena[off], off + 1
}

// putArray appends the member array of header hdr (mask word and
// memberships in words) to the arena, in the short form when it fits, and
// returns its handle. The arena has room for the long form.
func (t *blockTable) putArray(hdr uint64, words []uint64) uint64 {
	if v, ok := shortHandle(t.used, hdr); ok {
		t.used += copy(t.arena[t.used:], words)
		return v
	}
	off := t.used
	t.arena[off] = hdr
	t.used += 1 + copy(t.arena[off+1:], words)
	return handleOf(off)
}

// arrayWords returns the arena words a member array of handle val occupies.
func (t *blockTable) arrayWords(val uint64) int {
	hdr, _ := t.arrayAt(val)
	if val&shortBit != 0 {
		return hdrWords(hdr)
	}
	return 1 + hdrWords(hdr)
}

func newBlockMap(seed uint64) *blockMap {
	m := &blockMap{seed: seed}
	for i := range m.shards {
		m.shards[i].tab.Store(&blockTable{slots: make([]blockSlot, minSlots)})
	}
	return m
}

// locate returns the shard and home slot hash of key.
func (m *blockMap) locate(key Key) (*blockShard, uint64) {
	h := hashKey(key, m.seed)
	return &m.shards[h>>(64-8)], h
}

// view decodes a slot value of t into a blockVal pointing into t's arena.
func (t *blockTable) view(val uint64) blockVal {
	if !isHandle(val) {
		return blockVal{one: val}
	}
	hdr, maskOff := t.arrayAt(val)
	return blockVal{one: hdr, many: &t.arena[maskOff+1]}
}

// Load returns the value of key. It takes no lock and never waits.
func (m *blockMap) Load(key Key) (blockVal, bool) {
	sh, h := m.locate(key)
	t := sh.tab.Load()
	if v := t.probe(key, homeSlot(h, len(t.slots))); v != 0 {
		return t.view(v), true
	}
	return blockVal{}, false
}

// find returns the slot of key in t (-1 if absent) and, when absent, the
// slot an insert would take (the first tombstone or the empty slot ending
// the probe). The shard's mutex is held.
func (t *blockTable) find(key Key, h uint64) (at, free int) {
	n := uint64(len(t.slots))
	free = -1
	for i := homeSlot(h, len(t.slots)); ; i = next(i, n) {
		s := &t.slots[i]
		switch {
		case s.val == 0:
			if free < 0 {
				free = int(i)
			}
			return -1, free
		case s.val == tombVal:
			if free < 0 {
				free = int(i)
			}
		case s.key == uint64(key):
			return int(i), -1
		}
	}
}

// Compute calls fn with the current value of key (loaded reports whether it
// exists) under the shard's lock and stores what it returns, or deletes the
// key when fn returns del. fn must not call back into the map.
func (m *blockMap) Compute(key Key, fn func(v blockVal, loaded bool) (nv blockVal, del bool)) {
	sh, h := m.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.tab.Load()
	at, free := t.find(key, h)
	var cur blockVal
	var old uint64
	if at >= 0 {
		old = t.slots[at].val
		cur = t.view(old)
	}
	if at < 0 && (t.live+t.tombs+1)*16 > len(t.slots)*13 {
		t = m.rebuild(sh, t, 0) // room for one more slot
		_, free = t.find(key, h)
	}
	nv, del := fn(cur, at >= 0)
	if del || nv.count() == 0 {
		if at >= 0 {
			atomic.StoreUint64(&t.slots[at].val, tombVal)
			t.live--
			t.tombs++
			t.release(old)
		}
		return
	}
	if at >= 0 && nv == cur {
		return // unchanged
	}
	if nv.many != nil {
		if w := 1 + hdrWords(nv.one); t.used+w > len(t.arena) {
			t = m.rebuild(sh, t, w) // compacts; slots and handles move
			at, free = t.find(key, h)
			if at >= 0 {
				old = t.slots[at].val
			}
		}
	}
	val := nv.one
	if nv.many != nil {
		val = t.putArray(nv.one, nv.arrayWords())
	}
	if at >= 0 {
		atomic.StoreUint64(&t.slots[at].val, val)
		t.release(old)
		return
	}
	t.insert(key, h, val, free)
}

// insert stores a new key (of hash h) with value val, free being the first
// tombstone or empty slot of its probe. The shard's mutex is held.
//
// The new key takes its home slot, and the block there (if any) moves to
// free: last come, first served. Every key's probe then passes the same
// slots as before, so a table's average probe is what first come, first
// served gives, but the newest blocks, which the next requests look up
// most (a conversation's next turn, a prompt just routed), are nearly
// always in their home slot, which Match reads first, even in a table near
// its most full, where first come, first served leaves the newest key
// several slots away on average. The moved block is written at free before
// its home-slot copy is replaced, and moves only forward along its probe,
// so readers find it in one place or the other throughout.
func (t *blockTable) insert(key Key, h, val uint64, free int) {
	home := int(homeSlot(h, len(t.slots)))
	s := &t.slots[free]
	if s.val == tombVal {
		t.tombs--
	}
	t.live++
	if free != home {
		// The home slot holds another block (free is the first slot of the
		// probe from home that does not): it moves to free.
		hs := &t.slots[home]
		atomic.StoreUint64(&s.key, hs.key)
		atomic.StoreUint64(&s.val, hs.val)
		atomic.StoreUint64(&hs.val, tombVal)
		s = hs
	}
	atomic.StoreUint64(&s.key, uint64(key))
	atomic.StoreUint64(&s.val, val)
}

// release accounts for the arena words of a replaced or deleted value.
func (t *blockTable) release(val uint64) {
	if val != 0 && val != tombVal && isHandle(val) {
		t.garbage += t.arrayWords(val)
	}
}

// rebuild replaces the shard's table with a compacted one sized for its
// live blocks plus one insert and extra arena words, publishes it and
// returns it. The shard's mutex is held.
//
// A rebuild leaves the slots at most 5/8 full (see slotsFor), except that
// one for the arena (extra > 0) keeps the slot count while they are
// between 1/2 and 3/4 full. Where blocks gain and lose holders all the
// time, every change rewrites a member array and arena rebuilds are
// frequent; resizing the slots at each would only move them about.
func (m *blockMap) rebuild(sh *blockShard, t *blockTable, extra int) *blockTable {
	n := slotsFor(t.live + 1)
	words := t.used - t.garbage
	if cur := len(t.slots); extra > 0 && (t.live+1)*4 <= cur*3 && (t.live+1)*2 >= cur {
		n = cur
	}
	nt := &blockTable{slots: make([]blockSlot, n), live: t.live}
	if need := words + extra; need > 0 {
		// Free room for at least a quarter of the live words and an eighth
		// of the slots, so that rebuilds forced by the arena (each
		// O(slots + words)) come at most once per that many allocated
		// words.
		size := need + max(words/4, n/8, 16)
		if size >= shortOffLimit {
			size += t.live // arrays moving past the short form's offsets gain a header word
		}
		nt.arena = make([]uint64, size)
	}
	// Last come, first served as in insert, over the old slots from the
	// last: a block in its home slot there comes after those displaced past
	// it, so it takes its new home slot.
	for j := len(t.slots) - 1; j >= 0; j-- {
		s := t.slots[j]
		if s.val == 0 || s.val == tombVal {
			continue
		}
		val := s.val
		if isHandle(val) {
			hdr, maskOff := t.arrayAt(val)
			val = nt.putArray(hdr, t.arena[maskOff:maskOff+hdrWords(hdr)])
		}
		home := homeSlot(hashKey(Key(s.key), m.seed), n)
		i := home
		for nt.slots[i].val != 0 {
			i = next(i, uint64(n))
		}
		nt.slots[i] = nt.slots[home]
		nt.slots[home] = blockSlot{key: s.key, val: val}
	}
	sh.tab.Store(nt)
	return nt
}

// Range calls f for every block of a per-shard snapshot until f returns
// false. Blocks changed concurrently may be seen in either state.
func (m *blockMap) Range(f func(Key, blockVal) bool) {
	for i := range m.shards {
		t := m.shards[i].tab.Load()
		for j := range t.slots {
			s := &t.slots[j]
			v := atomic.LoadUint64(&s.val)
			if v == 0 || v == tombVal {
				continue
			}
			if !f(Key(atomic.LoadUint64(&s.key)), t.view(v)) {
				return
			}
		}
	}
}

// bytes returns the heap the map holds (slots and arenas), for tests.
func (m *blockMap) bytes() int {
	n := 0
	for i := range m.shards {
		t := m.shards[i].tab.Load()
		n += 16*len(t.slots) + 8*len(t.arena)
	}
	return n
}
