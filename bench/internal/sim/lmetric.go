package sim

import (
	"math/rand/v2"
	"time"

	"github.com/kvroute/kvroute/kvindex"
)

// LMetric (arXiv 2603.15202) multiplies a prefix-cache term with a load
// term instead of adding them (Dynamo's cost) or gating one by the other
// (SGLang's cache_aware, kvroute's affinity filter). Per worker:
//
//	new tokens = max(prompt tokens − cached blocks × block size, 0)
//	score      = new tokens × (in-flight requests + 1)
//
// and the lowest score wins. This is the formula of Dynamo's KV router
// with its worker-selection formula set to lmetric (lib/kv-router, the
// lmetric_score of its default worker selector: cached blocks are the
// worker's overlap blocks, in-flight requests its active request count;
// ties go to the worker with the smallest cached tree, then at random) and
// of the SGLang model gateway's lmetric policy
// (sgl-model-gateway/src/policies/lmetric.rs: new prefill work from its
// approximate tree × (worker load + 1), load being in-flight requests;
// ties by load, then new work). llm-d's precise-prefix-cache guide ships a
// values file selecting it. Implemented here from those formulas.
//
// As the simulation runs it, its overlap is Dynamo's: an exact index fed
// by the same engine events kvroute, dynamo and sglang-events get, or the
// router's own decisions of the last DynamoConfig.PredictedTTL when those
// cover more (before the engine's events arrive). Its load is the requests
// its own replica routed that have not finished; the tie-breaking tree
// size is the blocks each engine reports cached.
type lmetric struct {
	bs        int
	ttl       time.Duration
	ix        *kvindex.Index
	ids       []string
	now       func() time.Time
	predicted map[approxKey]int64 // expiry, ns of virtual time
	inflight  []int               // requests routed and not finished, per worker
	cached    []int               // blocks each engine reports cached
	keys      []kvindex.Key
	match     kvindex.MatchResult
	rng       *rand.Rand
	picks     int
}

func newLMetric(cfg Config, ids []string, ix *kvindex.Index, now func() time.Time, seed uint64) *lmetric {
	n := len(ids)
	return &lmetric{
		bs: cfg.Fleet.BlockSize, ttl: cfg.Peers.Dynamo.PredictedTTL, ix: ix, ids: ids, now: now,
		predicted: map[approxKey]int64{}, inflight: make([]int, n), cached: make([]int, n),
		rng: rand.New(rand.NewPCG(seed, 0x1e)),
	}
}

// lmetricScore is LMetric's score of a worker: the prompt tokens it would
// have to compute times its in-flight requests plus one.
func lmetricScore(promptTokens, cachedBlocks, blockSize, inflight int) float64 {
	fresh := max(promptTokens-cachedBlocks*blockSize, 0)
	return float64(fresh) * float64(inflight+1)
}

// cachedDelta adjusts engine i's reported cache by blocks; reset clears it.
func (l *lmetric) cachedDelta(i, blocks int, reset bool) {
	if reset {
		l.cached[i] = 0
	}
	l.cached[i] = max(l.cached[i]+blocks, 0)
}

func (l *lmetric) pick(rq *request) (int, error) {
	now := l.now().UnixNano()
	l.keys = keysOf(l.keys, rq.prompt, l.bs)
	if len(l.keys) > 0 {
		l.ix.Match(l.keys, l.ids, &l.match)
	} else {
		l.match.Reset()
	}
	best, ties := -1, 0
	var bestScore float64
	for i := range l.ids {
		overlap := l.predictedOverlap(i, now)
		if i < l.match.Len() {
			overlap = max(overlap, l.match.At(i).GPU)
		}
		s := lmetricScore(len(rq.prompt), overlap, l.bs, l.inflight[i])
		switch {
		case best < 0 || s < bestScore || (s == bestScore && l.cached[i] < l.cached[best]):
			best, bestScore, ties = i, s, 1
		case s == bestScore && l.cached[i] == l.cached[best]:
			ties++
			if l.rng.IntN(ties) == 0 {
				best = i
			}
		}
	}
	l.inflight[best]++
	if l.ttl > 0 {
		exp := now + int64(l.ttl)
		for _, k := range l.keys {
			l.predicted[approxKey{k, int32(best)}] = exp
		}
		if l.picks++; l.picks%4096 == 0 {
			for k, e := range l.predicted {
				if e <= now {
					delete(l.predicted, k)
				}
			}
		}
	}
	return best, nil
}

// predictedOverlap is the contiguous prefix of the request this router
// sent worker i within the TTL.
func (l *lmetric) predictedOverlap(i int, now int64) int {
	n := 0
	for _, k := range l.keys {
		if e, ok := l.predicted[approxKey{k, int32(i)}]; !ok || e <= now {
			break
		}
		n++
	}
	return n
}

func (l *lmetric) firstToken(*request) {}
func (l *lmetric) done(rq *request)    { l.inflight[rq.engine]-- }
func (l *lmetric) close()              { l.ix.Close() }
