package kvindex

import "math/bits"

// matchWide is Match for more than 64 candidates. Instead of one bitmask
// per chunk of 64 candidates (which would walk every block's memberships
// once per chunk, O(candidates²) for a prompt shared across the fleet), it
// keeps each candidate's contiguous block count and advances it when the
// candidate holds the block under the count: one pass over each block's
// memberships, whatever the number of candidates. The walk stops at the
// first block in which no candidate advanced — the first block no candidate
// holds contiguously, exactly where matchChunk's alive mask runs out. It
// returns the highest contiguous block count.
//
// Keys are looked up in batches (loadBatch), so that the lookups of the
// next blocks are in flight together instead of one after each block's
// processing.
func (ix *Index) matchWide(keys []Key, out *MatchResult, tt *tierTable) (best int) {
	s := &out.s
	n := len(s.cands)
	if cap(s.wblk) < n+1 {
		s.wblk = make([]int32, n+1)
		s.wacc = make([]excAcc, n+1)
		s.wtouched = s.wtouched[:0] // the fresh accumulators are zero
	}
	blk, acc := s.wblk[:n+1], s.wacc[:n+1]
	for _, c := range s.wtouched {
		if int(c) < len(acc) {
			acc[c] = excAcc{}
		}
	}
	s.wtouched = s.wtouched[:0]
	clear(blk)
	blk[0] = -1 // the sink of non-candidates never matches a block index
	slot := s.slot
	var nowMs uint64
	haveNow := false
	var vs [probeBatch]blockVal
	i, batch := 0, firstBatch
walk:
	for i < len(keys) {
		want := min(len(keys)-i, batch)
		batch = probeBatch
		got := ix.blocks.loadBatch(keys[i:i+want], &vs)
		for j := 0; j < got; j++ {
			v := &vs[j]
			cur := int32(i)
			adv := false
			var rest []uint64
			if v.many == nil {
				ms := [1]uint64{v.one}
				rest = ms[:]
				if isStd(v.one) {
					if id := v.one & idMask; id < uint64(len(slot)) {
						if c := slot[id]; blk[c] == cur {
							blk[c], adv = cur+1, true
						}
					}
					rest = nil
				}
			} else if v.one&hdrImplicit != 0 {
				adv = advanceMask(v.stdMask(), *v.many, slot, blk, cur)
			} else {
				var std []uint64
				std, rest = v.split(nil)
				adv = advanceStd(std, slot, blk, cur)
			}
			for _, m := range rest {
				id := m & idMask
				if id >= uint64(len(slot)) {
					continue
				}
				c := slot[id]
				if blk[c] != cur {
					continue // not a candidate, or its contiguous run already ended
				}
				a := &acc[c]
				if isSpec(m) {
					if !haveNow {
						nowMs, haveNow = ix.nowMs(), true
					}
					if specExpiry(m) <= nowMs {
						continue
					}
					a.spec++
					a.score += ix.specWeight
				} else {
					a.addHeld(tt, m)
				}
				if a.n == 0 {
					s.wtouched = append(s.wtouched, c)
				}
				a.n++
				blk[c], adv = cur+1, true
			}
			if !adv {
				break walk
			}
			i++
		}
		if got < want {
			break // keys[i] is absent
		}
	}
	return i
}

// advanceStd advances the contiguous count of every candidate among std
// (standard memberships) that held all blocks before cur, and reports
// whether any did: matchWide's inner loop.
func advanceStd(std []uint64, slot []int32, blk []int32, cur int32) (adv bool) {
	for _, m := range std {
		if id := m & idMask; id < uint64(len(slot)) {
			if c := slot[id]; blk[c] == cur {
				blk[c], adv = cur+1, true
			}
		}
	}
	return adv
}

// advanceMask is advanceStd for the memberships of an implicit array: those
// of endpoints memberID(m0)+j for the set bits j of mask.
func advanceMask(mask, m0 uint64, slot []int32, blk []int32, cur int32) (adv bool) {
	id := m0 & idMask
	for ; mask != 0; mask &= mask - 1 {
		if x := id + uint64(bits.TrailingZeros64(mask)); x < uint64(len(slot)) {
			if c := slot[x]; blk[c] == cur {
				blk[c], adv = cur+1, true
			}
		}
	}
	return adv
}
