package simengine

// Allocation in the window and Mamba groups, as vLLM's KV cache
// coordinator allocates a request's blocks in every group at once: on
// admission a request takes references on the hit blocks each group
// still needs, and each step it frees the blocks a group no longer needs
// (remove_skipped_blocks) and takes new ones for the tokens scheduled
// (allocate_new_blocks), full or not; blocks it holds are never evicted.

// skippedBlocks is how many leading blocks of a request with computed
// tokens group g no longer needs, as vLLM's get_num_skipped_tokens over
// the block size: a window group needs the last W−1 tokens (skipping
// computed−W+1), a Mamba group the state of the last one (computed−1).
func (hy *hybrid) skippedBlocks(g *cacheGroup, computed, bs int) int {
	skip := computed - 1
	if g.kind == KindSlidingWindow {
		skip = computed - hy.window + 1
	}
	return max(0, skip) / bs
}

// hybridAdmitLocked gives an admitted request s, whose hit is L blocks and
// of which s.computed tokens are computed, its blocks in every group for
// upTo tokens: references on the hit blocks the group still needs (vLLM's
// allocate_new_computed_blocks touches them, the skipped ones are null
// blocks), new blocks for the rest.
func (e *Engine) hybridAdmitLocked(s *seq, L, upTo int) {
	hy := e.hy
	if len(s.gblocks) != len(hy.groups) {
		s.gblocks = make([][]*gblock, len(hy.groups))
	}
	for gi, g := range hy.groups {
		lo := hy.skippedBlocks(g, s.computed, e.cfg.BlockSize)
		blocks := s.gblocks[gi][:0]
		for j := range L {
			var b *gblock
			if j >= lo {
				// allows checked that the group holds it.
				if b = g.set.cached(gkey{g.group, s.hashes[j]}); b != nil {
					g.set.touch(b)
				}
			}
			blocks = append(blocks, b)
		}
		s.gblocks[gi] = blocks
	}
	e.hybridAllocLocked(s, upTo)
}

// hybridAllocLocked is allocate_slots for the window and Mamba groups of
// s, scheduled up to upTo tokens with s.computed computed: first every
// group frees the blocks it no longer needs, tail first, then takes new
// blocks up to upTo, queueing a removal for each cached block an
// allocation evicts.
func (e *Engine) hybridAllocLocked(s *seq, upTo int) {
	hy, bs := e.hy, e.cfg.BlockSize
	for gi, g := range hy.groups {
		blocks := s.gblocks[gi]
		for j := min(hy.skippedBlocks(g, s.computed, bs), len(blocks)) - 1; j >= 0 && blocks[j] != nil; j-- {
			g.set.release(blocks[j])
			blocks[j] = nil
		}
	}
	need := (upTo + bs - 1) / bs
	for gi, g := range hy.groups {
		blocks := s.gblocks[gi]
		lo := hy.skippedBlocks(g, s.computed, bs)
		for len(blocks) < need {
			var b *gblock
			if len(blocks) >= lo {
				b, hy.ev = g.set.alloc(hy.ev[:0])
				if e.cfg.Sink != nil {
					for _, k := range hy.ev {
						e.pending = append(e.pending, Event{Type: BlockRemoved, BlockHashes: []uint64{k.d.U64()}, Medium: MediumGPU, GroupIdx: k.group})
					}
				}
			}
			blocks = append(blocks, b)
		}
		s.gblocks[gi] = blocks
	}
}

// hybridReleaseLocked frees every group block of s, tail first, as vLLM's
// free does in each group.
func (e *Engine) hybridReleaseLocked(s *seq) {
	for gi, g := range e.hy.groups {
		if gi >= len(s.gblocks) {
			break
		}
		releaseGroupBlocks(g, s.gblocks[gi])
		s.gblocks[gi] = s.gblocks[gi][:0]
	}
}

// releaseGroupBlocks drops the references blocks hold in g, tail first.
func releaseGroupBlocks(g *cacheGroup, blocks []*gblock) {
	for j := len(blocks) - 1; j >= 0; j-- {
		if blocks[j] != nil {
			g.set.release(blocks[j])
		}
	}
}

// hybridHoldLocked keeps the group blocks of a finished request s whose
// KV a decoder is to read (Request.HoldKV), as vLLM's delayed free keeps
// the request's blocks in every group; hybridReleaseHeldLocked frees them.
func (e *Engine) hybridHoldLocked(s *seq) {
	hy := e.hy
	if hy.held == nil {
		hy.held = make(map[ReqID][][]*gblock)
	}
	kept := make([][]*gblock, len(s.gblocks))
	for gi := range s.gblocks {
		kept[gi] = append([]*gblock(nil), s.gblocks[gi]...)
		s.gblocks[gi] = s.gblocks[gi][:0]
	}
	hy.held[s.id] = kept
}

// hybridReleaseHeldLocked frees the group blocks hybridHoldLocked kept for id.
func (e *Engine) hybridReleaseHeldLocked(id ReqID) {
	hy := e.hy
	kept, ok := hy.held[id]
	if !ok {
		return
	}
	delete(hy.held, id)
	for gi, g := range hy.groups {
		if gi < len(kept) {
			releaseGroupBlocks(g, kept[gi])
		}
	}
}
