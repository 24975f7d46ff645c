package simengine

import "slices"

// cacheGroup is one non-prefix group: its group_idx and its kind. Its
// blocks are the engine's block pool's, keyed by its group_idx.
type cacheGroup struct {
	group int
	kind  string
}

// hybrid is the engine's hybrid-mode state (nil without Config.Hybrid).
type hybrid struct {
	window int
	full   int           // the full-attention group's index
	pool   *blockPool    // the engine's pool, which every group allocates from
	groups []*cacheGroup // the window and Mamba groups, by index
	swa    []*cacheGroup // the window groups, by index
	mamba  *cacheGroup   // nil without a Mamba group
	// byKind lists the indices in groups of the window groups, then
	// Mamba's: the order in which a request frees its blocks, the same
	// whatever HybridConfig.GroupOrder numbers them, which changes only
	// the events.
	byKind []int
	added  []int // indices of the blocks a group added since its last store
	// held keeps the group blocks of finished requests whose full-attention
	// blocks are held for a KV transfer (Request.HoldKV), by request.
	held map[ReqID][][]int32
}

// newHybrid numbers the groups as vLLM does: it buckets the layers by
// spec in the order each spec's first layer appears, and splits each
// bucket into consecutive groups of equal layer count, so the n window
// groups are numbered one after the other, where the window's first layer
// puts them. Every group allocates from pool.
func newHybrid(h *HybridConfig, pool *blockPool) *hybrid {
	n := h.WindowGroups
	full, swa0, mamba := 0, 1, n+1
	switch h.GroupOrder {
	case OrderWindowFirst:
		swa0, full = 0, n
	case OrderMambaFirst:
		mamba, full, swa0 = 0, 1, 2
	}
	hy := &hybrid{window: h.SlidingWindow, full: full, pool: pool}
	for i := range n {
		g := &cacheGroup{group: swa0 + i, kind: KindSlidingWindow}
		hy.swa = append(hy.swa, g)
		hy.groups = append(hy.groups, g)
	}
	if h.Mamba {
		hy.mamba = &cacheGroup{group: mamba, kind: KindMamba}
		hy.groups = append(hy.groups, hy.mamba)
	}
	slices.SortFunc(hy.groups, func(a, b *cacheGroup) int { return a.group - b.group })
	for _, kind := range []string{KindSlidingWindow, KindMamba} {
		for gi, g := range hy.groups {
			if g.kind == kind {
				hy.byKind = append(hy.byKind, gi)
			}
		}
	}
	return hy
}

// has reports whether group g caches the block with digest d.
func (hy *hybrid) has(g *cacheGroup, d Digest) bool { return hy.pool.has(gkey{g.group, d}) }
