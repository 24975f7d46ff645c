package sim

import (
	"container/list"
	"math/rand/v2"
	"time"

	"github.com/kvroute/kvroute/kvindex"
)

// approx is the Approximate policy: a model of a cache-blind, prefix-aware
// gateway, shaped like llm-d's approximate prefix-cache scheduling profile.
// It never hears from the engines' caches. After each decision it records
// that the chosen endpoint holds every block of the prompt, for TTL
// (refreshed whenever the prefix is sent there again) and at most as many
// blocks per endpoint as the engine has GPU blocks, the least recently
// sent forgotten first: llm-d's approximate prefix scorer keeps one LRU
// per endpoint sized from the engine's reported num_gpu_blocks (autoTune,
// its default) and inserts a prompt's blocks last block first, so the
// prompt's head is kept longest. It cannot know what the engine evicted,
// never cached, or cached from generated tokens.
//
// Score of endpoint i = PrefixWeight × (contiguous remembered blocks /
// prompt blocks) + QueueWeight × queue score + KVWeight × (1 − KV-cache
// usage). The queue score is the min-max normalised waiting-queue length
// (1 for the shortest queue, 0 for the longest, 1 for all when equal), and
// the waiting queue and KV-cache usage are the engine's
// vllm:num_requests_waiting and vllm:kv_cache_usage_perc, scraped every
// ScrapeInterval as a gateway scrapes them. The default weights 3, 2 and 2
// are those of llm-d's prefix-cache, queue and kv-cache-utilization
// scorers in that profile. Ties are broken at random.
type approx struct {
	bs           int
	ttl          int64 // ns
	now          func() time.Time
	prefixWeight float64
	queueWeight  float64
	kvWeight     float64
	scrape       func(i int) (waiting int, usage float64)
	interval     int64 // ns
	lastScrape   int64
	waiting      []int
	usage        []float64
	seen         map[approxKey]int64 // expiry, ns of virtual time
	capacity     int                 // blocks remembered per endpoint
	lru          []*list.List        // per endpoint, of approxKey, most recent first
	elems        map[approxKey]*list.Element
	keys         []kvindex.Key
	scores       []float64
	rng          *rand.Rand
	picks        int
}

type approxKey struct {
	key      kvindex.Key
	endpoint int32
}

func newApprox(cfg Config, now func() time.Time, scrape func(i int) (int, float64), seed uint64) *approx {
	n := cfg.Fleet.Engines
	lru := make([]*list.List, n)
	for i := range lru {
		lru[i] = list.New()
	}
	return &approx{capacity: cfg.Fleet.NumGPUBlocks, lru: lru, elems: map[approxKey]*list.Element{},
		bs: cfg.Fleet.BlockSize, ttl: int64(cfg.ApproxTTL), now: now,
		prefixWeight: cfg.ApproxPrefixWeight, queueWeight: cfg.ApproxQueueWeight, kvWeight: cfg.ApproxKVWeight,
		scrape: scrape, interval: int64(cfg.ScrapeInterval), lastScrape: -1 << 62,
		waiting: make([]int, n), usage: make([]float64, n),
		seen: map[approxKey]int64{}, scores: make([]float64, n), rng: rand.New(rand.NewPCG(seed, 0xa9)),
	}
}

func (a *approx) pick(rq *request) (int, error) {
	now := a.now().UnixNano()
	if now-a.lastScrape >= a.interval {
		for i := range a.waiting {
			a.waiting[i], a.usage[i] = a.scrape(i)
		}
		a.lastScrape = now
	}
	a.keys = keysOf(a.keys, rq.prompt, a.bs)
	minQ, maxQ := a.waiting[0], a.waiting[0]
	for _, q := range a.waiting {
		minQ, maxQ = min(minQ, q), max(maxQ, q)
	}
	best, ties := -1, 0
	for i := range a.waiting {
		matched := 0
		for _, k := range a.keys {
			if exp, ok := a.seen[approxKey{k, int32(i)}]; !ok || exp <= now {
				break
			}
			matched++
		}
		s := 0.0
		if len(a.keys) > 0 {
			s = a.prefixWeight * float64(matched) / float64(len(a.keys))
		}
		q := 1.0
		if maxQ > minQ {
			q = float64(maxQ-a.waiting[i]) / float64(maxQ-minQ)
		}
		s += a.queueWeight*q + a.kvWeight*(1-a.usage[i])
		a.scores[i] = s
		switch {
		case best < 0 || s > a.scores[best]:
			best, ties = i, 1
		case s == a.scores[best]:
			ties++
			if a.rng.IntN(ties) == 0 {
				best = i
			}
		}
	}
	a.record(best, now+a.ttl)
	if a.picks++; a.picks%4096 == 0 {
		for k, exp := range a.seen {
			if exp <= now {
				a.forget(k)
			}
		}
	}
	return best, nil
}

// record remembers that endpoint i was sent a.keys, until exp, inserting
// the last block first, then forgets its least recently sent blocks beyond
// a.capacity.
func (a *approx) record(i int, exp int64) {
	l := a.lru[i]
	for j := len(a.keys) - 1; j >= 0; j-- {
		k := approxKey{a.keys[j], int32(i)}
		a.seen[k] = exp
		if e, ok := a.elems[k]; ok {
			l.MoveToFront(e)
		} else {
			a.elems[k] = l.PushFront(k)
		}
	}
	for l.Len() > a.capacity {
		a.forget(l.Back().Value.(approxKey))
	}
}

// forget drops k from the approximate router's memory.
func (a *approx) forget(k approxKey) {
	delete(a.seen, k)
	if e, ok := a.elems[k]; ok {
		a.lru[k.endpoint].Remove(e)
		delete(a.elems, k)
	}
}

func (a *approx) firstToken(*request) {}
func (a *approx) done(*request)       {}
func (a *approx) close()              {}
