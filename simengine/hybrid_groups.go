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

// lruEntry is one cached copy of a group's block; stamp is the store that
// cached it (hybrid.stamp).
type lruEntry struct {
	k     gkey
	stamp uint64
}

// lruSet is the cache of one or more non-prefix groups sharing a
// capacity: copies of (group, digest) blocks, least recently used first.
// The sliding-window groups share one, as vLLM's groups share one block
// pool, so that one window group may lose a block the others still hold.
// Like vLLM's block pool, it does not de-duplicate: a group that computes
// a block it holds already caches a second copy, evicted on its own, and
// a hit touches the copy cached first (BlockPool.get_cached_block).
type lruSet struct {
	cap   int
	order *list.List               // of lruEntry
	at    map[gkey][]*list.Element // the copies of a block, in caching order
}

func newLRUSet(n int) *lruSet {
	return &lruSet{cap: n, order: list.New(), at: make(map[gkey][]*list.Element)}
}

func (l *lruSet) has(k gkey) bool { return len(l.at[k]) > 0 }

func (l *lruSet) touch(k gkey) {
	if els := l.at[k]; len(els) > 0 {
		l.order.MoveToBack(els[0])
	}
}

// add caches a new copy of k, cached by store stamp, and appends the
// copies it evicted, of any group sharing l, to evicted.
func (l *lruSet) add(k gkey, stamp uint64, evicted []lruEntry) []lruEntry {
	for l.order.Len() >= l.cap {
		el := l.order.Front()
		old := l.order.Remove(el).(lruEntry)
		els := l.at[old.k]
		if i := slices.Index(els, el); i >= 0 {
			els = slices.Delete(els, i, i+1)
		}
		if len(els) == 0 {
			delete(l.at, old.k)
		} else {
			l.at[old.k] = els
		}
		evicted = append(evicted, old)
	}
	l.at[k] = append(l.at[k], l.order.PushBack(lruEntry{k: k, stamp: stamp}))
	return evicted
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
	ev     []lruEntry
	stamp  uint64 // counts the groups' stores, to tell the copies each cached
	added  []int  // indices of the blocks a group added since its last store
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
