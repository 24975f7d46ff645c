package kvindex

// matchWide is Match for more than 64 candidates. Instead of one bitmask
// per chunk of 64 candidates (which would walk every block's memberships
// once per chunk, O(candidates²) for a prompt shared across the fleet), it
// keeps each candidate's contiguous block count and advances it when the
// candidate holds the block under the count: one pass over each block's
// memberships, whatever the number of candidates. The walk stops at the
// first block in which no candidate advanced — the first block no candidate
// holds contiguously, exactly where matchChunk's alive mask runs out.
func (ix *Index) matchWide(keys []Key, cands []string, out *MatchResult, tt *tierTable) (best int) {
	s := &out.s
	n := len(cands)
	if cap(s.wblk) < n+1 {
		s.wblk = make([]int32, n+1)
		s.wacc = make([]excAcc, n+1) // zeroed, as the output loop leaves it
	}
	blk, acc := s.wblk[:n+1], s.wacc[:n+1]
	clear(blk)
	blk[0] = -1 // the sink of non-candidates never matches a block index
	slot := s.slot
	var nowMs uint64
	haveNow := false
	i := 0
	for ; i < len(keys); i++ {
		v, ok := ix.blocks.Load(keys[i])
		if !ok {
			break
		}
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
		} else {
			var std []uint64
			std, rest = v.split()
			for _, m := range std {
				if id := m & idMask; id < uint64(len(slot)) {
					if c := slot[id]; blk[c] == cur {
						blk[c], adv = cur+1, true
					}
				}
			}
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
				mask := tierMaskOf(m)
				cls := tt.clsOf[mask]
				a.score += tt.maxW[mask]
				a.gpu += int32(cls & classGPU)
				a.cpu += int32(cls&classCPU) >> 1
				a.storage += int32(cls&classStorage) >> 2
				a.other += int32(cls&classOther) >> 3
			}
			a.n++
			blk[c], adv = cur+1, true
		}
		if !adv {
			break
		}
	}
	wGPU := tt.maxW[1]
	for c := range n {
		e := &out.Endpoints[c]
		// Fields are assigned one by one, as in matchChunk.
		setName(e, cands[c])
		switch f := int(s.first[c]); {
		case f != c:
			d := &out.Endpoints[f]
			e.Blocks, e.Score, e.Speculative = d.Blocks, d.Score, d.Speculative
			e.GPU, e.CPU, e.Storage, e.Other = d.GPU, d.CPU, d.Storage, d.Other
		case s.ids[c] == 0:
			e.Blocks, e.Score, e.Speculative = 0, 0, 0
			e.GPU, e.CPU, e.Storage, e.Other = 0, 0, 0, 0
		case acc[c+1].n == 0:
			n := int(blk[c+1])
			e.Blocks, e.Score, e.Speculative = n, float64(n)*wGPU, 0
			e.GPU, e.CPU, e.Storage, e.Other = n, 0, 0, 0
			best = max(best, n)
		default:
			n := int(blk[c+1])
			a := &acc[c+1]
			std := n - int(a.n)
			e.Blocks, e.Score, e.Speculative = n, float64(std)*wGPU+a.score, int(a.spec)
			e.GPU, e.CPU, e.Storage, e.Other = std+int(a.gpu), int(a.cpu), int(a.storage), int(a.other)
			best = max(best, n)
			*a = excAcc{}
		}
	}
	return best
}
