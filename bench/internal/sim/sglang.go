package sim

import (
	"cmp"
	"slices"
	"time"

	"github.com/kvroute/kvroute/kvindex"
)

// sglangImbalanced is the cache_aware policy's imbalance test over
// in-flight request counts: max − min > abs and max > rel × min.
func sglangImbalanced(c SGLangConfig, loads []int) bool {
	if len(loads) == 0 {
		return false
	}
	lo, hi := loads[0], loads[0]
	for _, l := range loads {
		lo, hi = min(lo, l), max(hi, l)
	}
	return hi-lo > c.BalanceAbsThreshold && float64(hi) > c.BalanceRelThreshold*float64(lo)
}

// sglangMinLoad is cache_aware's least-loaded worker: the lowest
// (in-flight requests, requests sent so far, index), the order in which
// the gateway breaks ties between equally loaded workers
// (lightseekorg/smg#1714), so idle workers take turns.
func sglangMinLoad(loads, processed []int) int {
	lo := 0
	for i := 1; i < len(loads); i++ {
		if loads[i] < loads[lo] || (loads[i] == loads[lo] && processed[i] < processed[lo]) {
			lo = i
		}
	}
	return lo
}

// sglangChoose is the cache_aware decision on the approximate tree once
// the match is known: the least-loaded worker (sglangMinLoad) when
// imbalanced; else the best-matching worker when matched ÷ prompt tokens >
// CacheThreshold; else the least-loaded worker again. That last fallback
// is the gateway's code (lightseekorg/smg, select_worker_with_tokens and
// select_worker_with_text); its header comment and older sgl-router
// releases say the worker with the smallest tree. It returns the worker
// and the branch taken.
func sglangChoose(c SGLangConfig, loads, processed []int, best, matched, promptTokens int) (int, string) {
	if sglangImbalanced(c, loads) {
		return sglangMinLoad(loads, processed), "imbalanced"
	}
	if promptTokens > 0 && best >= 0 && float64(matched)/float64(promptTokens) > c.CacheThreshold {
		return best, "match"
	}
	return sglangMinLoad(loads, processed), "least-load"
}

// prefixTree is SGLang's approximate radix tree at block granularity: for
// each block key (chained, so a key stands for its whole prefix), the
// workers whose tree holds it and when each last used it. Sizes are in
// tokens, as the gateway counts characters or tokens.
type prefixTree struct {
	bs    int
	nodes map[kvindex.Key][]treeEntry
	depth map[kvindex.Key]int32
	size  []int
}

type treeEntry struct {
	worker int32
	last   int64 // ns of virtual time
}

func newPrefixTree(workers, bs int) *prefixTree {
	return &prefixTree{bs: bs, nodes: map[kvindex.Key][]treeEntry{}, depth: map[kvindex.Key]int32{}, size: make([]int, workers)}
}

// match walks keys from the root while some worker holds the whole prefix,
// and returns the deepest matched block count and, among the workers
// holding that node, the one that used it last (-1 when nothing matched).
func (t *prefixTree) match(keys []kvindex.Key) (worker, blocks int) {
	worker = -1
	var alive []int32
	for d, k := range keys {
		es := t.nodes[k]
		var next []int32
		for _, e := range es {
			if d == 0 || slices.Contains(alive, e.worker) {
				next = append(next, e.worker)
			}
		}
		if len(next) == 0 {
			break
		}
		alive, blocks = next, d+1
	}
	if blocks == 0 {
		return -1, 0
	}
	var last int64 = -1 << 62
	for _, e := range t.nodes[keys[blocks-1]] {
		if slices.Contains(alive, e.worker) && (e.last > last || (e.last == last && int(e.worker) < worker)) {
			worker, last = int(e.worker), e.last
		}
	}
	return worker, blocks
}

// insert records that worker was sent keys at time now.
func (t *prefixTree) insert(keys []kvindex.Key, worker int, now int64) {
	for d, k := range keys {
		es := t.nodes[k]
		found := false
		for i := range es {
			if int(es[i].worker) == worker {
				es[i].last, found = now, true
				break
			}
		}
		if !found {
			t.nodes[k] = append(es, treeEntry{worker: int32(worker), last: now})
			t.depth[k] = int32(d)
			t.size[worker] += t.bs
		}
	}
}

// evict cuts every worker's tree down to maxSize tokens, least recently
// used first and, among equally recent entries, the deepest (leaves) first.
func (t *prefixTree) evict(maxSize int) {
	type victim struct {
		key   kvindex.Key
		last  int64
		depth int32
	}
	for w := range t.size {
		if t.size[w] <= maxSize {
			continue
		}
		var vs []victim
		for k, es := range t.nodes {
			for _, e := range es {
				if int(e.worker) == w {
					vs = append(vs, victim{k, e.last, t.depth[k]})
				}
			}
		}
		slices.SortFunc(vs, func(a, b victim) int {
			if c := cmp.Compare(a.last, b.last); c != 0 {
				return c
			}
			if c := cmp.Compare(b.depth, a.depth); c != 0 {
				return c
			}
			return cmp.Compare(a.key, b.key)
		})
		for _, v := range vs {
			if t.size[w] <= maxSize {
				break
			}
			es := t.nodes[v.key]
			es = slices.DeleteFunc(es, func(e treeEntry) bool { return int(e.worker) == w })
			if len(es) == 0 {
				delete(t.nodes, v.key)
				delete(t.depth, v.key)
			} else {
				t.nodes[v.key] = es
			}
			t.size[w] -= t.bs
		}
	}
}

// sglangEventChoose is cache_aware's event-driven decision, the path the
// gateway takes, when the pool is balanced, once the engines' KV events
// have filled its index: among the workers holding the prompt's first
// block, the one with the longest cached prefix (overlap, in blocks), ties
// to the lower load, then the smaller cache (sizes), then the last worker
// (Rust's max_by_key); no match-ratio threshold applies. When no worker
// holds any of it, the least-loaded worker (sglangMinLoad).
func sglangEventChoose(loads, processed, overlap, sizes []int) int {
	best := -1
	for i, o := range overlap {
		switch {
		case o == 0:
		case best < 0, o > overlap[best],
			o == overlap[best] && (loads[i] < loads[best] || loads[i] == loads[best] && sizes[i] <= sizes[best]):
			best = i
		}
	}
	if best < 0 {
		return sglangMinLoad(loads, processed)
	}
	return best
}

// sglang is the SGLang model gateway's cache_aware policy. Its load is the
// in-flight requests it routed to each worker; processed counts every
// request it routed to each, for sglangMinLoad's ties. The approximate
// variant (ix nil) matches against its own prefixTree of the prompts it
// routed (sglangChoose). The event-fed variant, as the gateway does with
// KV events, decides by sglangEventChoose over an index fed by the
// engines' events, each worker's cache size being the blocks its engine
// reports cached; while that index is still empty (before the first
// events), and when the pool is imbalanced, it decides as the approximate
// variant does, over a tree of the prompts routed those ways.
type sglang struct {
	cfg       SGLangConfig
	bs        int
	ids       []string
	now       func() time.Time
	tree      *prefixTree         // the approximate tree
	ix        *kvindex.Index      // event-fed variant
	cached    []int               // event-fed: blocks each engine reports cached, in tokens
	match     kvindex.MatchResult // event-fed
	overlap   []int               // event-fed: each worker's cached prefix, in blocks
	loads     []int
	processed []int
	keys      []kvindex.Key
	lastEvict int64
}

func newSGLang(cfg Config, ids []string, ix *kvindex.Index, now func() time.Time) *sglang {
	n := len(ids)
	s := &sglang{cfg: cfg.Peers.SGLang, bs: cfg.Fleet.BlockSize, ids: ids, now: now, ix: ix, tree: newPrefixTree(n, cfg.Fleet.BlockSize),
		loads: make([]int, n), processed: make([]int, n), lastEvict: now().UnixNano()}
	if ix != nil {
		s.cached, s.overlap = make([]int, n), make([]int, n)
	}
	return s
}

// cachedDelta adjusts the engine-reported cache size of worker i by blocks
// (event-fed variant); reset clears it.
func (s *sglang) cachedDelta(i, blocks int, reset bool) {
	if reset {
		s.cached[i] = 0
	}
	s.cached[i] = max(s.cached[i]+blocks*s.bs, 0)
}

// indexed reports whether the event-fed index holds any block.
func (s *sglang) indexed() bool {
	for _, c := range s.cached {
		if c > 0 {
			return true
		}
	}
	return false
}

func (s *sglang) pick(rq *request) (int, error) {
	now := s.now().UnixNano()
	if s.cfg.EvictionInterval > 0 && now-s.lastEvict >= int64(s.cfg.EvictionInterval) {
		s.tree.evict(s.cfg.MaxTreeSize)
		s.lastEvict = now
	}
	s.keys = keysOf(s.keys, rq.prompt, s.bs)
	var i int
	if s.ix != nil && !sglangImbalanced(s.cfg, s.loads) && s.indexed() {
		clear(s.overlap)
		if len(s.keys) > 0 {
			s.ix.Match(s.keys, s.ids, &s.match)
			for j := range min(s.match.Len(), len(s.overlap)) {
				s.overlap[j] = s.match.Blocks(j)
			}
		}
		i = sglangEventChoose(s.loads, s.processed, s.overlap, s.cached)
	} else {
		best, blocks := s.tree.match(s.keys)
		i, _ = sglangChoose(s.cfg, s.loads, s.processed, best, blocks*s.bs, len(rq.prompt))
		s.tree.insert(s.keys, i, now)
	}
	s.loads[i]++
	s.processed[i]++
	return i, nil
}

func (s *sglang) firstToken(*request) {}
func (s *sglang) done(rq *request)    { s.loads[rq.engine]-- }
func (s *sglang) close() {
	if s.ix != nil {
		s.ix.Close()
	}
}
