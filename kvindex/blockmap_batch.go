package kvindex

import "sync/atomic"

// probeBatch is how many keys loadBatch and presBatch look up together,
// and firstBatch how many of a prompt's keys Match looks up first. Match
// knows all of a prompt's keys up front; looking several up at once lets
// the CPU overlap their cache misses (shard table, slot, member array
// header), which a lookup per processed block serialises behind the
// processing's mispredicted branches. Each batch ends with the reads of
// its member arrays, which wait for its slots, so fewer, larger batches
// leave fewer such waits in a row; a first batch of eight keeps the work
// small for a prompt whose first block misses (a new prompt), and once
// those are present the rest go sixteen at a time.
const (
	probeBatch = 16
	firstBatch = 8
)

// loadBatch looks up keys (at most probeBatch of them) and stores their
// values in vs, in order. It returns how many leading keys are present: it
// stops at the first absent one, whose value and those after it are
// unspecified. Like Load it takes no lock and never waits.
//
// The home slot of every key is read first, with no branch that depends on
// a loaded value, so the loads of different keys are in flight together; a
// key that is not in its home slot (a collision, a tombstone) takes Load's
// probe loop.
func (m *blockMap) loadBatch(keys []Key, vs *[probeBatch]blockVal) int {
	var (
		tabs  [probeBatch]*blockTable
		sp    [probeBatch]*blockSlot
		home  [probeBatch]uint64
		vals  [probeBatch]uint64
		found [probeBatch]uint64
	)
	keys = keys[:min(len(keys), probeBatch)]
	for j, k := range keys {
		h := hashKey(k, m.seed)
		t := m.shards[h>>(64-8)].tab.Load()
		i := homeSlot(h, len(t.slots))
		s := &t.slots[i]
		tabs[j], sp[j], home[j] = t, s, i
		found[j] = atomic.LoadUint64(&s.key)
		vals[j] = atomic.LoadUint64(&s.val)
	}
	for j, k := range keys {
		v, t := vals[j], tabs[j]
		if v != 0 && (v == tombVal || found[j] != uint64(k) || atomic.LoadUint64(&sp[j].key) != found[j]) {
			// Not in its home slot (or that slot changed meanwhile): the
			// probe, usually over the cache line just loaded.
			v = t.probe(k, home[j])
		}
		if v == 0 {
			return j
		}
		vs[j] = t.view(v)
	}
	return len(keys)
}

// probe returns the slot value of key in t, searching from slot i (its
// home slot, or a later one of its probe) on, or 0 when an empty slot ends
// the probe first: Load's loop, which loadBatch and presBatch also take for
// a key not in its home slot. A slot's value is taken only when the slot's
// key reads as key before and after the value does. A block that an insert
// moves out of its home slot (see blockTable.insert) leaves the slot's
// value a tombstone while the key changes, so a value read across the
// change is either a tombstone or comes with another key on one side;
// reading the key on both sides, rather than the value, also refuses the
// value of another block that took the slot meanwhile and happens to have
// the same value (two blocks held only by the same endpoint do), which a
// value read twice would take for key's. A slot that held key when its
// key was first read and no longer did after its value was read is read
// again, not passed: the block may have moved on along the probe, which
// the next read shows as a tombstone or another key. The reads do not tell
// apart a key that left the slot and came back between them (key removed
// or moved on, another block stored in the slot, that one removed or moved
// on, key stored there again, all between two of the reader's loads, or
// for loadBatch and presBatch between a home slot's first read and its
// re-check): that one lookup then takes the other block's value. Ruling it
// out would take a version per slot, read on Match's path.
func (t *blockTable) probe(key Key, i uint64) uint64 {
	n := uint64(len(t.slots))
	for {
		s := &t.slots[i]
		k := atomic.LoadUint64(&s.key)
		v := atomic.LoadUint64(&s.val)
		if v == 0 {
			return 0
		}
		if v != tombVal && k == uint64(key) {
			if atomic.LoadUint64(&s.key) == k {
				return v
			}
			continue // changed meanwhile: read the slot again
		}
		i = next(i, n)
	}
}

// next returns the slot after i in a table of n slots.
func next(i, n uint64) uint64 {
	i++
	if i == n {
		i = 0
	}
	return i
}
