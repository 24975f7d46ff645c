package kvindex

// resolveHybrid fills s.hy, per candidate, with its endpoint's non-prefix
// groups (nil for none) and sets s.anyHy when any candidate has some.
// Called by resolve.
func (s *matchScratch) resolveHybrid(ix *Index, cands []string) {
	s.anyHy = false
	if ix.nHybrid.Load() == 0 {
		return
	}
	if cap(s.hy) < len(cands) {
		s.hy = make([]*hybridEP, len(cands))
		s.hyL = make([]int32, len(cands))
	}
	s.hy, s.hyL = s.hy[:len(cands)], s.hyL[:len(cands)]
	for i, name := range cands {
		s.hy[i] = nil
		if hy, ok := ix.hybrid.Load(name); ok {
			s.hy[i], s.anyHy = hy, true
		}
	}
}

// limitHybrid computes, after the walk, each hybrid candidate's longest
// usable prefix of keys (groups.go), which entry then applies. The groups
// are asked from the count rounded to the candidate's engine blocks down
// (engine_blocks.go), not from the raw count: a prefix a group allows
// beyond the rounded count says nothing about the rounded one, whose
// window reaches further back. A block the candidate holds speculatively
// counts as held by its groups (specHeld), looked up only for a candidate
// with speculative blocks in its contiguous run.
func (s *matchScratch) limitHybrid(keys []Key, bs int) {
	s.hyDone = false
	var now lazyNow
	for i, hy := range s.hy {
		if hy == nil {
			continue
		}
		n, a := s.entryRaw(i)
		sp := specHeld{}
		if a != nil && a.spec > 0 {
			sp = specHeld{ix: s.ix, id: s.ids[i], now: &now}
		}
		if s.anyEBS {
			n, _ = s.capEntry(i, n, nil)
		}
		hy.mu.RLock()
		if hy.dead {
			// Cleared since resolve: its blocks are gone (Clear removes
			// them before the groups), whatever the walk saw of them.
			s.hyL[i] = 0
		} else {
			s.hyL[i] = int32(hy.usable(keys, n, bs, &sp))
		}
		hy.mu.RUnlock()
	}
	s.hyDone = true
}

// specHeld tells whether endpoint id holds a block speculatively (and
// unexpired) in the block map: a block Speculate named for it, which the
// request routed there caches in every group, so its groups count it as
// held (groups.go). The zero specHeld holds nothing.
type specHeld struct {
	ix  *Index
	id  uint32
	now *lazyNow
}

func (p *specHeld) held(k Key) bool {
	if p.ix == nil {
		return false
	}
	v, ok := p.ix.blocks.Load(k)
	if !ok {
		return false
	}
	m, _ := v.find(p.id)
	return isSpec(m) && specExpiry(m) > p.now.get(p.ix)
}
