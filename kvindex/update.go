package kvindex

import "math/bits"

// opKind is a change to one (block, endpoint) membership.
type opKind uint8

const (
	opAdd    opKind = iota // a confirmed store of (tier, group); supersedes speculation
	opRemove               // a removal of (tier, group)
	opDrop                 // remove the whole membership (eviction, clear, remapping)
	opSpec                 // speculative until exp, unless confirmed
	opExpire               // remove if speculative and expired at now
)

// memberOp describes one membership change and receives its outcome.
type memberOp struct {
	kind  opKind
	tier  uint8
	group int32
	exp   uint64 // opSpec: expiry; opExpire: now (ms since epoch)

	before, after uint64 // membership before and after (0 = none)
	pairGone      bool   // opRemove: the (tier, group) pair disappeared

	// findOther asks apply for other: the ID of another endpoint holding
	// the block as a confirmed membership afterwards (0 = none), with whom
	// the engine-hash entry may be shared.
	findOther bool
	other     uint32
}

// apply performs op on endpoint ep's membership of key. ep.mu is held; the
// block map's shard lock is held while the new block value is built, and
// the value is published atomically for Match.
func (ix *Index) apply(ep *endpoint, key Key, op *memberOp) {
	ix.blocks.Compute(key, func(v blockVal, loaded bool) (blockVal, bool) {
		old, idx := uint64(0), -1
		if loaded {
			old, idx = v.find(ep.id)
		}
		nw := ix.transition(ep, key, old, op)
		op.before, op.after = old, nw
		if op.findOther {
			op.other = otherHolder(&v, ep.id)
		}
		if nw == old {
			// Unchanged: the map skips rewriting an identical value, and
			// inserts nothing for an absent key.
			return v, !loaded
		}
		nv := v.withBuf(idx, nw, &ep.arr) // the map copies it into its arena
		switch {
		case old == 0:
			ix.nMembers.Add(1)
			ep.members++
			if !loaded {
				ix.nBlocks.Add(1)
			}
		case nw == 0:
			ix.nMembers.Add(-1)
			ep.members--
			if nv.count() == 0 {
				ix.nBlocks.Add(-1)
			}
		}
		if old != 0 && isSpec(old) && (nw == 0 || !isSpec(nw)) {
			ix.nSpec.Add(-1)
		}
		if nw != 0 && isSpec(nw) && (old == 0 || !isSpec(old)) {
			ix.nSpec.Add(1)
		}
		return nv, nv.count() == 0
	})
}

// transition computes the new membership word for op.
func (ix *Index) transition(ep *endpoint, key Key, old uint64, op *memberOp) uint64 {
	switch op.kind {
	case opAdd:
		if isSpec(old) {
			old = 0 // a confirmed store supersedes the speculation
		}
		pairs := ep.decode(key, old)
		pairs = addPair(pairs, op.tier, op.group)
		return ep.encode(key, old, pairs)
	case opRemove:
		if old == 0 || isSpec(old) {
			return old
		}
		pairs := ep.decode(key, old)
		pairs, found, gone := removePair(pairs, op.tier, op.group)
		if !found {
			return old
		}
		op.pairGone = gone
		return ep.encode(key, old, pairs)
	case opDrop:
		if old&complexBit != 0 && !isSpec(old) {
			ep.dropCx(key)
		}
		return 0
	case opSpec:
		if old != 0 && !isSpec(old) {
			return old // confirmed blocks need no speculation
		}
		if old != 0 && specExpiry(old) >= op.exp {
			return old
		}
		return makeSpec(ep.id, op.exp)
	case opExpire:
		if isSpec(old) && specExpiry(old) <= op.exp {
			return 0
		}
		return old
	}
	return old
}

// decode returns the pairs of a confirmed membership (nil for 0) in the
// endpoint's scratch slice.
func (ep *endpoint) decode(key Key, m uint64) []pair {
	ep.scratch = ep.scratch[:0]
	if m == 0 {
		return ep.scratch
	}
	var cx []pair
	if m&complexBit != 0 {
		cx = ep.cx[key]
	}
	ep.scratch = decodePairs(ep.scratch, m, cx)
	return ep.scratch
}

// encode returns the membership word for pairs (0 when empty), keeping the
// side-table entry of key in step.
func (ep *endpoint) encode(key Key, old uint64, pairs []pair) uint64 {
	if len(pairs) == 0 {
		if old&complexBit != 0 {
			ep.dropCx(key)
		}
		return 0
	}
	m, complex := encodePairs(ep.id, pairs)
	switch {
	case complex:
		if ep.cx == nil {
			ep.cx = make(map[Key][]pair)
		}
		// A new array whenever the number of pairs changes, so that its
		// capacity, which the entry is charged for, follows from the pairs
		// alone (the same in an index restored from a snapshot).
		prev := ep.cx[key]
		cur := prev[:0]
		if len(prev) != len(pairs) {
			cur = nil
		}
		cur = append(cur, pairs...)
		ep.cxExtra += extraPairs(cap(cur)) - extraPairs(cap(prev))
		ep.cx[key] = cur
	case old&complexBit != 0:
		ep.dropCx(key)
	}
	return m
}

// dropCx deletes key's side-table entry.
func (ep *endpoint) dropCx(key Key) {
	ep.cxExtra -= extraPairs(cap(ep.cx[key]))
	delete(ep.cx, key)
}

// extraPairs is the number of pairs a side-table entry of capacity n has
// room for beyond those costComplex covers (membound.go).
func extraPairs(n int) int { return max(0, n-complexPairs) }

// otherHolder returns the ID of an endpoint other than id holding v as a
// confirmed membership, or 0.
func otherHolder(v *blockVal, id uint32) uint32 {
	if v.implicit() { // every membership confirmed: the first, or the second
		m0 := *v.many
		if memberID(m0) != id {
			return memberID(m0)
		}
		mask := v.stdMask() &^ 1
		if mask == 0 {
			return 0
		}
		return memberID(m0 + uint64(bits.TrailingZeros64(mask)))
	}
	var buf memberBuf
	for _, m := range v.members(&buf) {
		if memberID(m) != id && !isSpec(m) {
			return memberID(m)
		}
	}
	return 0
}
