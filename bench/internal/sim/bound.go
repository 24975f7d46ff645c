package sim

import (
	"container/heap"

	"github.com/kvroute/kvroute/kvindex"
)

// boundTrace records, in arrival order, every block reference of a run for
// the capacity bound: each prompt's blocks when it arrives (the first
// ⌊(n−1)/block size⌋ of them can be hits, as in the engine) and, when a
// request finishes, the blocks its answer completed (insertions only).
//
// req names, for each reference, the request it belongs to (numbered in
// arrival order) and answer whether it is an answer's block, for the
// LRU-residency bound (bound_lru.go).
type boundTrace struct {
	refs    []kvindex.Key
	counted []bool
	req     []int32
	answer  []bool
	n       int32 // requests numbered so far
}

// request numbers the next request.
func (t *boundTrace) request() int32 {
	t.n++
	return t.n - 1
}

// add appends request req's prompt blocks, the first countable of which
// can be hits.
func (t *boundTrace) add(keys []kvindex.Key, countable int, req int32) {
	for i, k := range keys {
		t.refs = append(t.refs, k)
		t.counted = append(t.counted, i < countable)
		t.req = append(t.req, req)
		t.answer = append(t.answer, false)
	}
}

// addAnswer appends the blocks request req's answer completed.
func (t *boundTrace) addAnswer(keys []kvindex.Key, req int32) {
	for _, k := range keys {
		t.refs = append(t.refs, k)
		t.counted = append(t.counted, false)
		t.req = append(t.req, req)
		t.answer = append(t.answer, true)
	}
}

// beladyHits returns how many counted references hit in a cache of
// capacity blocks managed by Belady's optimal replacement (MIN, with
// bypass): every reference makes its block available (it is computed
// then), and the block is kept only if its next reference is a counted one
// and comes sooner than that of the cached block needed furthest in the
// future, which is evicted. For equal-sized blocks no replacement policy
// has more hits on the same reference string (the tests check it against
// an exhaustive search). The references are blocks of a pooled cache: a hit
// needs the block anywhere, in any position of the prompt, so the count
// bounds the prefix hits of any routing over engines whose caches sum to
// capacity.
func beladyHits(refs []kvindex.Key, counted []bool, capacity int) int {
	n := len(refs)
	next := make([]int, n)
	last := make(map[kvindex.Key]int, n/4)
	for i := n - 1; i >= 0; i-- {
		// A block is worth keeping only until its next reference, and only
		// if that reference can hit: an uncounted one makes it available
		// again for free.
		if j, ok := last[refs[i]]; ok && counted[j] {
			next[i] = j
		} else {
			next[i] = n // never again
		}
		last[refs[i]] = i
	}
	cached := make(map[kvindex.Key]int, capacity) // key → its next use
	var far farthest
	hits := 0
	for i, k := range refs {
		if _, ok := cached[k]; ok {
			if counted[i] {
				hits++
			}
			if next[i] == n {
				delete(cached, k)
				continue
			}
			cached[k] = next[i]
			heap.Push(&far, use{next[i], k})
			continue
		}
		if next[i] == n || capacity <= 0 {
			continue // bypass: never used again
		}
		if len(cached) >= capacity {
			for cached[far[0].key] != far[0].at {
				heap.Pop(&far) // stale entry
			}
			if far[0].at < next[i] {
				continue // every cached block is needed sooner: bypass
			}
			delete(cached, heap.Pop(&far).(use).key)
		}
		cached[k] = next[i]
		heap.Push(&far, use{next[i], k})
	}
	return hits
}

// use is a cached block and the index of its next reference.
type use struct {
	at  int
	key kvindex.Key
}

// farthest is a max-heap of uses by next reference; entries whose key has
// been re-referenced or evicted since are stale and skipped.
type farthest []use

func (h farthest) Len() int           { return len(h) }
func (h farthest) Less(i, j int) bool { return h[i].at > h[j].at }
func (h farthest) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *farthest) Push(x any)        { *h = append(*h, x.(use)) }
func (h *farthest) Pop() any {
	old := *h
	u := old[len(old)-1]
	*h = old[:len(old)-1]
	return u
}

// pooledLRUHits returns how many counted references hit in one pooled cache
// of capacity blocks that, like each engine's prefix cache, keeps every
// block it sees and evicts the least recently used. It is a reference, not
// a bound: it shows what perfect routing would get from engines with the
// replacement they actually have, answers' blocks included.
func pooledLRUHits(refs []kvindex.Key, counted []bool, capacity int) int {
	c := newLRUCache(capacity)
	hits := 0
	for i, k := range refs {
		if c.ref(k) && counted[i] {
			hits++
		}
	}
	return hits
}
