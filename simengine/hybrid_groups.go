package simengine

import (
	"container/list"
	"slices"
)

// gkey names one group's copy of a block in a pool its group may share
// with others of its kind.
type gkey struct {
	group int
	d     Digest
}

// gblock is one block of a non-prefix group's pool. While ref > 0 running
// requests hold it (it is in no free queue and never evicted); hashed says
// it caches the full block k, which keeps it hittable in the free queue
// until an allocation reuses it.
type gblock struct {
	k      gkey
	hashed bool
	ref    int32
	el     *list.Element // its place in the free queue; nil while held
}

// groupPool is the block pool of one or more non-prefix groups sharing a
// capacity, run as vLLM's BlockPool: a request's blocks are held (ref
// counted) from allocation until the request frees them or they leave
// what its group still needs (the window, the last Mamba state); a freed
// block joins the tail of the free queue with its hash kept, and a cached
// free block is evicted only when an allocation takes it from the head.
// The sliding-window groups share one, as vLLM's groups share one block
// pool, so that one window group may lose a block the others still hold.
// Like vLLM's, it does not de-duplicate: a group that computes a block it
// holds already caches a second copy, evicted on its own, and a hit takes
// the copy cached first (BlockPool.get_cached_block).
//
// Unlike vLLM's pool, which every group shares with full attention, a
// group pool never makes a request wait: when its requests hold every one
// of its cap blocks, an allocation adds one more, and later allocations
// evict free blocks until it is back to cap. Its size is bounded by cap
// or by what running requests hold at once.
type groupPool struct {
	cap  int
	size int                // blocks held or in the free queue
	free *list.List         // of *gblock with ref 0, reused from the front
	at   map[gkey][]*gblock // cached copies of a block, in caching order
}

func newGroupPool(n int) *groupPool {
	return &groupPool{cap: n, free: list.New(), at: make(map[gkey][]*gblock)}
}

func (p *groupPool) has(k gkey) bool { return len(p.at[k]) > 0 }

// cached returns the copy of k cached first, or nil.
func (p *groupPool) cached(k gkey) *gblock {
	if els := p.at[k]; len(els) > 0 {
		return els[0]
	}
	return nil
}

// touch takes a reference on b, a prefix hit, as BlockPool.touch: a free
// block leaves the free queue.
func (p *groupPool) touch(b *gblock) {
	if b.ref == 0 && b.el != nil {
		p.free.Remove(b.el)
		b.el = nil
	}
	b.ref++
}

// release drops a reference; a block no request holds joins the tail of
// the free queue, its hash kept.
func (p *groupPool) release(b *gblock) {
	b.ref--
	if b.ref == 0 {
		b.el = p.free.PushBack(b)
	}
}

// alloc returns a new block held once, as BlockPool.get_new_blocks: a
// block never used while the pool has fewer than cap, otherwise the head
// of the free queue, whose cached block is evicted, or one block more
// when every block is held. It appends what it evicted to evicted.
func (p *groupPool) alloc(evicted []gkey) (*gblock, []gkey) {
	// Blocks added past cap while every block was held go first.
	for p.size > p.cap && p.free.Len() > 0 {
		_, evicted = p.takeHead(evicted)
		p.size--
	}
	if p.size < p.cap || p.free.Len() == 0 {
		p.size++
		return &gblock{ref: 1}, evicted
	}
	b, evicted := p.takeHead(evicted)
	b.ref = 1
	return b, evicted
}

// takeHead removes the head of the free queue, evicting its cached block.
func (p *groupPool) takeHead(evicted []gkey) (*gblock, []gkey) {
	b := p.free.Remove(p.free.Front()).(*gblock)
	b.el = nil
	if b.hashed {
		els := p.at[b.k]
		if i := slices.Index(els, b); i >= 0 {
			els = slices.Delete(els, i, i+1)
		}
		if len(els) == 0 {
			delete(p.at, b.k)
		} else {
			p.at[b.k] = els
		}
		b.hashed = false
		evicted = append(evicted, b.k)
	}
	return b, evicted
}

// cache records that held block b now caches the full block k.
func (p *groupPool) cache(b *gblock, k gkey) {
	b.k, b.hashed = k, true
	p.at[k] = append(p.at[k], b)
}

// reset empties the pool; the engine calls it only when no request holds
// a block (a prefix-cache reset succeeds only then).
func (p *groupPool) reset() {
	p.free.Init()
	clear(p.at)
	p.size = 0
}

// cacheGroup is one non-prefix group: its group_idx, its kind and the
// pool it keeps its blocks in.
type cacheGroup struct {
	group int
	kind  string
	set   *groupPool
}

func (g *cacheGroup) has(d Digest) bool { return g.set.has(gkey{g.group, d}) }

// hybrid is the engine's hybrid-mode state (nil without Config.Hybrid).
type hybrid struct {
	window int
	full   int           // the full-attention group's index
	groups []*cacheGroup // the window and Mamba groups, by index
	swa    []*cacheGroup // the window groups, by index
	swaSet *groupPool    // the pool the window groups share
	mamba  *cacheGroup   // nil without a Mamba group
	ev     []gkey
	added  []int // indices of the blocks a group added since its last store
	// held keeps the group blocks of finished requests whose full-attention
	// blocks are held for a KV transfer (Request.HoldKV), by request.
	held map[ReqID][][]*gblock
}

// newHybrid numbers the groups as vLLM does: it buckets the layers by
// spec in the order each spec's first layer appears, and splits each
// bucket into consecutive groups of equal layer count, so the n window
// groups are numbered one after the other, where the window's first layer
// puts them.
func newHybrid(h *HybridConfig) *hybrid {
	n := h.WindowGroups
	full, swa0, mamba := 0, 1, n+1
	switch h.GroupOrder {
	case OrderWindowFirst:
		swa0, full = 0, n
	case OrderMambaFirst:
		mamba, full, swa0 = 0, 1, 2
	}
	hy := &hybrid{window: h.SlidingWindow, full: full, swaSet: newGroupPool(n * h.WindowBlocks)}
	for i := range n {
		g := &cacheGroup{group: swa0 + i, kind: KindSlidingWindow, set: hy.swaSet}
		hy.swa = append(hy.swa, g)
		hy.groups = append(hy.groups, g)
	}
	if h.Mamba {
		hy.mamba = &cacheGroup{group: mamba, kind: KindMamba, set: newGroupPool(h.MambaStates)}
		hy.groups = append(hy.groups, hy.mamba)
	}
	slices.SortFunc(hy.groups, func(a, b *cacheGroup) int { return a.group - b.group })
	return hy
}

func (hy *hybrid) reset() {
	hy.swaSet.reset()
	if hy.mamba != nil {
		hy.mamba.set.reset()
	}
}
