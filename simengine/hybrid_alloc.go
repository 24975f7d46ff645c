package simengine

// Allocation in the window and Mamba groups, as vLLM's KV cache
// coordinator allocates a request's blocks in every group at once, from
// the one block pool every group shares: on admission a request takes
// references on the hit blocks each group still needs, and each step it
// frees the blocks a group no longer needs (remove_skipped_blocks) and
// takes new ones for the tokens scheduled (allocate_new_blocks), full or
// not; blocks it holds are never evicted. A group's block list has -1
// where the group needs no block (vLLM's null block). The scheduler counts
// these blocks with the full-attention ones before it admits a request or
// lets a running one go on (scheduler.go), so a step happens only when
// the pool can give every group its blocks.

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

// hybridAdmitNeedLocked is how many free blocks admitting s, with a hit of
// L blocks, computed tokens and upTo tokens scheduled, takes in the window
// and Mamba groups: its new blocks, and the hit blocks it needs that sit
// in the free queue (touching them takes them out of it, which is why
// vLLM's get_num_blocks_to_allocate counts them too).
func (e *Engine) hybridAdmitNeedLocked(s *seq, L, computed, upTo int) int {
	hy, bs := e.hy, e.cfg.BlockSize
	need, n := (upTo+bs-1)/bs, 0
	for _, g := range hy.groups {
		lo := hy.skippedBlocks(g, computed, bs)
		for j := lo; j < L; j++ {
			if b, ok := e.pool.lookup(gkey{g.group, s.hashes[j]}); ok && e.pool.ref[b] == 0 {
				n++
			}
		}
		n += max(0, need-max(L, lo))
	}
	return n
}

// hybridTouchHitsLocked takes references on the hit blocks of an admitted
// request s, whose hit is L blocks and of which s.computed tokens are
// computed, that each group still needs (vLLM's
// allocate_new_computed_blocks touches them; the skipped ones are null
// blocks). It runs before any allocation of s, in any group, so that no
// allocation evicts a hit block not yet touched.
func (e *Engine) hybridTouchHitsLocked(s *seq, L int) {
	hy := e.hy
	if len(s.gblocks) != len(hy.groups) {
		s.gblocks = make([][]int32, len(hy.groups))
	}
	for gi, g := range hy.groups {
		lo := hy.skippedBlocks(g, s.computed, e.cfg.BlockSize)
		blocks := s.gblocks[gi][:0]
		for j := range L {
			b := int32(-1)
			if j >= lo {
				// allows checked that the group holds it.
				if c, ok := e.pool.lookup(gkey{g.group, s.hashes[j]}); ok {
					e.pool.touch(c)
					b = c
				}
			}
			blocks = append(blocks, b)
		}
		s.gblocks[gi] = blocks
	}
}

// hybridSkipLocked frees, tail first, the blocks each group of s no longer
// needs now that s.computed tokens are computed (remove_skipped_blocks,
// which vLLM runs before it counts the blocks a step needs). It goes
// through the groups in hy.byKind order, so that their numbering does not
// change the free queue.
func (e *Engine) hybridSkipLocked(s *seq) {
	hy, bs := e.hy, e.cfg.BlockSize
	for _, gi := range hy.byKind {
		if gi >= len(s.gblocks) {
			break
		}
		g, blocks := hy.groups[gi], s.gblocks[gi]
		for j := min(hy.skippedBlocks(g, s.computed, bs), len(blocks)) - 1; j >= 0 && blocks[j] >= 0; j-- {
			e.pool.release(blocks[j])
			blocks[j] = -1
		}
	}
}

// hybridNeedLocked is how many new blocks the window and Mamba groups of a
// running request s take to schedule it up to upTo tokens, once
// hybridSkipLocked freed what they no longer need.
func (e *Engine) hybridNeedLocked(s *seq, upTo int) int {
	hy, bs := e.hy, e.cfg.BlockSize
	need, n := (upTo+bs-1)/bs, 0
	for gi, g := range hy.groups {
		have := 0
		if gi < len(s.gblocks) {
			have = len(s.gblocks[gi])
		}
		n += max(0, need-max(have, hy.skippedBlocks(g, s.computed, bs)))
	}
	return n
}

// hybridAllocLocked gives every window and Mamba group of s, scheduled up
// to upTo tokens with s.computed computed, new pool blocks up to upTo
// (allocate_slots for these groups), queueing the removal of each cached
// block of any group an allocation evicts. The caller checked that the
// pool has the blocks (hybridNeedLocked, hybridAdmitNeedLocked).
func (e *Engine) hybridAllocLocked(s *seq, upTo int) {
	hy, bs := e.hy, e.cfg.BlockSize
	if len(s.gblocks) != len(hy.groups) {
		s.gblocks = make([][]int32, len(hy.groups))
	}
	need := (upTo + bs - 1) / bs
	for gi, g := range hy.groups {
		blocks := s.gblocks[gi]
		lo := hy.skippedBlocks(g, s.computed, bs)
		for len(blocks) < need {
			b := int32(-1)
			if len(blocks) >= lo {
				b = e.allocBlockLocked()
			}
			blocks = append(blocks, b)
		}
		s.gblocks[gi] = blocks
	}
}

// hybridReleaseLocked frees the blocks gb holds (a request's, by group),
// each group's tail first as vLLM's free does, after the full-attention
// ones, and returns how many it freed. It goes through the groups in
// hy.byKind order, so that their numbering does not change the free queue.
func (e *Engine) hybridReleaseLocked(gb [][]int32) int {
	n := 0
	for _, gi := range e.hy.byKind {
		if gi >= len(gb) {
			continue
		}
		blocks := gb[gi]
		for j := len(blocks) - 1; j >= 0; j-- {
			if blocks[j] >= 0 {
				e.pool.release(blocks[j])
				n++
			}
		}
		gb[gi] = blocks[:0]
	}
	return n
}

// hybridHoldLocked keeps the group blocks of a finished request s whose
// KV a decoder is to read (Request.HoldKV), as vLLM's delayed free keeps
// the request's blocks in every group, and returns how many it keeps;
// ReleaseKV frees them (hybridReleaseLocked on hy.held).
func (e *Engine) hybridHoldLocked(s *seq) int {
	hy := e.hy
	if hy.held == nil {
		hy.held = make(map[ReqID][][]int32)
	}
	kept, n := make([][]int32, len(s.gblocks)), 0
	for gi := range s.gblocks {
		kept[gi] = append([]int32(nil), s.gblocks[gi]...)
		for _, b := range kept[gi] {
			if b >= 0 {
				n++
			}
		}
		s.gblocks[gi] = s.gblocks[gi][:0]
	}
	hy.held[s.id] = kept
	return n
}

// hybridPeakBlocks bounds the blocks a request of tokens tokens holds at
// once in every group, full attention included: all its full-attention
// blocks, and in each window or Mamba group at most those of a step's
// tokens (up to MaxNumBatchedTokens) and of what the group keeps before
// them (the last W−1 tokens, the last Mamba state), block boundaries
// included. Submit refuses a request above the pool, which could never
// run even alone.
func (e *Engine) hybridPeakBlocks(tokens int) int {
	bs := e.cfg.BlockSize
	n := (tokens + bs - 1) / bs
	peak := n
	for _, g := range e.hy.groups {
		reach := e.cfg.MaxNumBatchedTokens + bs
		if g.kind == KindSlidingWindow {
			reach += e.hy.window - 2
		}
		peak += min(n, (reach+bs-1)/bs)
	}
	return peak
}
