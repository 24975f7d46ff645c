package simengine

import (
	"container/list"
	"slices"
)

// gkey names one group's copy of a block in a cache its group may share
// with others of its kind.
type gkey struct {
	group int
	d     Digest
}

// lruSet is the cache of one or more non-prefix groups sharing a
// capacity: (group, digest) entries, least recently used first. The
// sliding-window groups share one, as vLLM's groups share one block pool,
// so that one window group may lose a block the others still hold.
type lruSet struct {
	cap   int
	order *list.List // of gkey
	at    map[gkey]*list.Element
}

func newLRUSet(n int) *lruSet {
	return &lruSet{cap: n, order: list.New(), at: make(map[gkey]*list.Element)}
}

func (l *lruSet) has(k gkey) bool { _, ok := l.at[k]; return ok }

func (l *lruSet) touch(k gkey) {
	if el, ok := l.at[k]; ok {
		l.order.MoveToBack(el)
	}
}

// add inserts k (reporting false when it was there, then only touched) and
// appends the entries it evicted, of any group sharing l, to evicted.
func (l *lruSet) add(k gkey, evicted []gkey) ([]gkey, bool) {
	if el, ok := l.at[k]; ok {
		l.order.MoveToBack(el)
		return evicted, false
	}
	for l.order.Len() >= l.cap {
		old := l.order.Remove(l.order.Front()).(gkey)
		delete(l.at, old)
		evicted = append(evicted, old)
	}
	l.at[k] = l.order.PushBack(k)
	return evicted, true
}

func (l *lruSet) reset() {
	l.order.Init()
	clear(l.at)
}

// cacheGroup is one non-prefix group: its group_idx, its kind and the
// cache it keeps its blocks in.
type cacheGroup struct {
	group int
	kind  string
	set   *lruSet
}

func (g *cacheGroup) has(d Digest) bool { return g.set.has(gkey{g.group, d}) }
func (g *cacheGroup) touch(d Digest)    { g.set.touch(gkey{g.group, d}) }

// hybrid is the engine's hybrid-mode state (nil without Config.Hybrid).
type hybrid struct {
	window int
	full   int           // the full-attention group's index
	groups []*cacheGroup // the window and Mamba groups, by index
	swa    []*cacheGroup // the window groups, by index
	swaSet *lruSet       // the cache the window groups share
	mamba  *cacheGroup   // nil without a Mamba group
	ev     []gkey
	added  []int // indices of the blocks a group added since its last store
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
	hy := &hybrid{window: h.SlidingWindow, full: full, swaSet: newLRUSet(n * h.WindowBlocks)}
	for i := range n {
		g := &cacheGroup{group: swa0 + i, kind: KindSlidingWindow, set: hy.swaSet}
		hy.swa = append(hy.swa, g)
		hy.groups = append(hy.groups, g)
	}
	if h.Mamba {
		hy.mamba = &cacheGroup{group: mamba, kind: KindMamba, set: newLRUSet(h.MambaStates)}
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
