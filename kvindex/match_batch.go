package kvindex

import (
	"sync/atomic"
	"unsafe"
)

// chunkBatch is what presBatch hands matchChunk for one batch of keys.
type chunkBatch struct {
	// pres is, per block in a common shape, the chunk's candidates holding
	// it.
	pres [probeBatch]uint64
	// vs is, per block in any other shape (a bit of presBatch's slow mask),
	// its value, for the general path (chunkPresence).
	vs [probeBatch]blockVal
}

// presBatch is loadBatch fused with the first step of Match: it looks up
// keys (at most probeBatch) and, for every block in one of the two shapes
// that make up nearly all of a warm index, computes the chunk's candidates
// holding it (b.pres) without building a blockVal:
//
//   - a single membership that is standard (confirmed, GPU tier only): its
//     endpoint's bit in the per-ID bit table;
//   - a short-form member array of standard memberships only with an exact
//     mask (in the implicit form or the full one), when the chunk's bits are endpoint IDs from relBase on (rel):
//     the mask word shifted by its base (the first membership's ID) minus
//     relBase. The mask word and that membership are adjacent arena words,
//     read together straight after the slot.
//
// Every other block is decoded into b.vs and its bit set in slow, for
// chunkPresence. It returns, like loadBatch, how many leading keys are
// present (the values of later ones are unspecified) and the slow mask.
//
// Doing this in one function over the batch, rather than per block after
// the batch is loaded, keeps the loop that issues the arena reads short:
// the reads of all the batch's arrays are in flight together, and no
// blockVal (a Go pointer into the arena, stored with a write barrier
// check) is built for the common blocks.
func (m *blockMap) presBatch(keys []Key, bit []uint64, rel bool, relBase uint32, b *chunkBatch) (got int, slow uint32) {
	var (
		tabs  [probeBatch]*blockTable
		sp    [probeBatch]*blockSlot
		vals  [probeBatch]uint64
		found [probeBatch]uint64
	)
	keys = keys[:min(len(keys), probeBatch)]
	for j, k := range keys {
		h := hashKey(k, m.seed)
		t := m.shards[h>>(64-8)].tab.Load()
		s := &t.slots[homeSlot(h, len(t.slots))]
		tabs[j], sp[j] = t, s
		found[j] = atomic.LoadUint64(&s.key)
		vals[j] = atomic.LoadUint64(&s.val)
	}
	// bit's last entry is never set (see grow): IDs beyond it read that.
	last := uint64(len(bit) - 1)
	bits := unsafe.Pointer(unsafe.SliceData(bit))
	base := int64(relBase)
	// Without rel, no slot value matches fast: the fast array case is one
	// compare.
	fast := shortBit | shortNarrow
	if !rel {
		fast = ^uint64(0)
	}
	pres := &b.pres
	for j, k := range keys {
		v, t := vals[j], tabs[j]
		if v != 0 && (v == tombVal || found[j] != uint64(k) || atomic.LoadUint64(&sp[j].key) != found[j]) {
			// Not in its home slot (or that slot changed meanwhile): the
			// probe, usually over the cache line just loaded.
			v = t.probe(k, homeSlot(hashKey(k, m.seed), len(t.slots)))
		}
		if v == 0 {
			return j, slow
		}
		switch {
		case v&idMask != 0 && isStd(v):
			pres[j] = *(*uint64)(unsafe.Add(bits, 8*min(v&idMask, last)))
		case v&shortFast == fast:
			off := int(v>>idBits&shortOffMask) - 1
			w := t.arena[off : off+2 : off+2]
			mask, d := w[0], int64(w[1]&idMask)-base
			if d >= 0 {
				mask <<= uint64(d)
			} else {
				mask >>= uint64(-d)
			}
			pres[j] = mask
		default:
			b.vs[j] = t.view(v)
			slow |= 1 << uint(j)
		}
	}
	return len(keys), slow
}
