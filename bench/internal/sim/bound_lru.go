package sim

import (
	"container/list"

	"github.com/kvroute/kvroute/kvindex"
)

// The LRU-residency bound: the capacity bound with what the engines'
// replacement forces every engine to hold taken out, valid for any routing.
//
// An idle block is one no counted reference of the whole trace asks for
// (on shared-prefix: a prompt's last block, which the engine always
// recomputes, and every answer block): dropping it never costs a hit, and
// Belady's replacement never keeps it. An engine cannot drop it: vLLM
// evicts the least recently freed block, a request frees all its blocks at
// once when it ends (its tail first), and a running request pins its
// blocks (the proof assumes a running request holds its whole prompt: true
// once its prefill is done, not during a chunked prefill nor after a
// preemption in the middle of one, which it does not bound; on the
// simulated engine the tests measure the bound instead of relying on it).
// So at any time an engine holds, besides the blocks of the running
// requests, every block of the requests that ended most recently, except
// at most one request cut at the boundary. Counting requests by class
// (requests with the same idle prompt blocks), an engine whose cache is
// full holds at least k = ⌈(C − B + 1) ÷ B⌉ classes whole, where C is its
// capacity and B the most blocks one request holds, and with them at least
// u·k idle blocks, u being the fewest idle prompt blocks of any request
// (a running request has not written its answer yet, so only its prompt's
// idle blocks are certain). An engine that is not full holds every block it
// ever saw, so at most (B − u) live blocks per class it served. Hence
//
//	live(engine) ≤ U = max(C − u·k, max over 0 ≤ D < k of min(C − u·D, (B − u)·D))
//
// whatever the routing, and the fleet's caches together hold at most N·U
// blocks a later request can hit. The bound is Belady's replacement (with
// bypass) over one pooled cache of N·U blocks on the run's own reference
// string: the fleet's caches restricted to live blocks are such a cache
// (blocks enter only when referenced, a hit needs the block somewhere),
// and Belady is optimal for it. The class count needs the classes to be
// well formed: two requests' idle prompt blocks are the same set or
// disjoint, and requests with the same set hold the same blocks (on
// shared-prefix: the same group and user get the same answer); shapeOf
// checks it and falls back to u = 0 (Belady's bound) when it fails.
type lruShape struct {
	maxBlocks  int  // B: the most blocks one request holds
	minIdle    int  // u: the fewest idle prompt blocks of a request
	wellFormed bool // the idle prompt blocks form classes
}

// shapeOf measures B and u on the reference string and checks the classes.
func shapeOf(t *boundTrace) lruShape {
	if t.n == 0 {
		return lruShape{wellFormed: true}
	}
	live := make(map[kvindex.Key]bool, len(t.refs)/4)
	for i, k := range t.refs {
		live[k] = live[k] || t.counted[i]
	}
	blocks := make([]map[kvindex.Key]bool, t.n) // block → is a prompt block
	for i, k := range t.refs {
		r := t.req[i]
		if blocks[r] == nil {
			blocks[r] = map[kvindex.Key]bool{}
		}
		blocks[r][k] = blocks[r][k] || !t.answer[i]
	}
	s := lruShape{minIdle: -1, wellFormed: true}
	owner := map[kvindex.Key]setSig{} // idle prompt block → its class
	class := map[setSig]setSig{}      // a class's idle prompt blocks → all its blocks
	for _, bs := range blocks {
		s.maxBlocks = max(s.maxBlocks, len(bs))
		var idle, all setSig
		n := 0
		for k, prompt := range bs {
			all.add(k)
			if prompt && !live[k] {
				idle.add(k)
				n++
			}
		}
		if s.minIdle < 0 || n < s.minIdle {
			s.minIdle = n
		}
		if n == 0 {
			continue
		}
		if c, ok := class[idle]; ok && c != all {
			s.wellFormed = false
		}
		class[idle] = all
		for k, prompt := range bs {
			if !prompt || live[k] {
				continue
			}
			if o, ok := owner[k]; ok && o != idle {
				s.wellFormed = false
			}
			owner[k] = idle
		}
	}
	if !s.wellFormed || s.minIdle < 0 {
		s.minIdle = 0
	}
	return s
}

// setSig is an order-independent signature of a set of block keys.
type setSig struct{ sum, xor uint64 }

func (s *setSig) add(k kvindex.Key) {
	h := mix(uint64(k))
	s.sum += h
	s.xor ^= h
}

// mix spreads a block key's bits (splitmix64's finaliser) so that sums and
// XORs of keys make set signatures.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// whole is k: how many classes an engine of capacity blocks holds whole
// once full, ⌈(C − B + 1) ÷ B⌉ = ⌊C ÷ B⌋ (at most B − 1 blocks of a
// request cut at the boundary, the rest in whole classes of ≤ B blocks).
func (s lruShape) whole(capacity int) int {
	if s.maxBlocks <= 0 {
		return 0
	}
	return capacity / s.maxBlocks
}

// usefulBlocks returns U: the most live blocks one engine of capacity
// blocks can hold at any time, whatever the routing.
func (s lruShape) usefulBlocks(capacity int) int {
	k := s.whole(capacity)
	if s.minIdle <= 0 || k == 0 {
		return capacity
	}
	best := capacity - s.minIdle*k
	for d := 0; d < k; d++ {
		best = max(best, min(capacity-s.minIdle*d, (s.maxBlocks-s.minIdle)*d))
	}
	return min(best, capacity)
}

// lruBoundHits returns the LRU-residency bound in hit blocks for engines
// engines of perEngine blocks each: Belady over a pooled cache of
// engines × usefulBlocks(perEngine).
func lruBoundHits(t *boundTrace, engines, perEngine int) (int, lruShape) {
	s := shapeOf(t)
	return beladyHits(t.refs, t.counted, engines*s.usefulBlocks(perEngine)), s
}

// LRUShape is what the LRU-residency bound measured on a run's trace
// (Result.LRUShape), for the report.
type LRUShape struct {
	// MaxBlocks is the most blocks one request holds (B).
	MaxBlocks int `json:"maxBlocks"`
	// MinIdle is the fewest idle prompt blocks of a request (u): blocks no
	// counted reference of the trace asks for. 0 when the requests' idle
	// blocks do not form classes (then the bound is Belady's).
	MinIdle int `json:"minIdle"`
	// Whole is how many classes of requests a full engine certainly holds
	// whole (k).
	Whole int `json:"whole"`
	// LiveBlocks is the pooled cache of the bound: engines × the most live
	// blocks one engine can hold (N·U).
	LiveBlocks int `json:"liveBlocks"`
}

func (s lruShape) export(capacity, engines int) LRUShape {
	return LRUShape{MaxBlocks: s.maxBlocks, MinIdle: s.minIdle, Whole: s.whole(capacity), LiveBlocks: engines * s.usefulBlocks(capacity)}
}

// lruCache is one idealised LRU cache of blocks: every reference moves its
// block to the front, a miss inserts it there and evicts the back.
type lruCache struct {
	capacity int
	order    *list.List
	at       map[kvindex.Key]*list.Element
}

func newLRUCache(capacity int) *lruCache {
	return &lruCache{capacity: capacity, order: list.New(), at: map[kvindex.Key]*list.Element{}}
}

// ref references k and reports whether it was cached.
func (c *lruCache) ref(k kvindex.Key) bool {
	if e, ok := c.at[k]; ok {
		c.order.MoveToFront(e)
		return true
	}
	if c.capacity <= 0 {
		return false
	}
	if c.order.Len() >= c.capacity {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.at, old.Value.(kvindex.Key))
	}
	c.at[k] = c.order.PushFront(k)
	return false
}
