package sim

import (
	"slices"
	"time"
)

// result summarises a finished run.
func (r *run) result() Result {
	res := Result{
		Workload: r.cfg.Workload.Kind, Policy: r.policy, Load: r.cfg.Load,
		OfferedQPS: r.cfg.Load * r.cfg.Capacity(), Requests: len(r.reqs),
	}
	var ttfts []time.Duration
	first, last := time.Time{}, time.Time{}
	for _, rq := range r.reqs {
		if first.IsZero() || rq.at.Before(first) {
			first = rq.at
		}
		if !rq.finished || rq.failed {
			continue
		}
		res.Completed++
		ttfts = append(ttfts, rq.ttft)
		if rq.finish.After(last) {
			last = rq.finish
		}
	}
	res.TTFTP50, res.TTFTP90, res.TTFTP99 = percentile(ttfts, 0.50), percentile(ttfts, 0.90), percentile(ttfts, 0.99)
	if !last.IsZero() {
		res.Makespan = last.Sub(first)
		if res.Makespan > 0 {
			res.Throughput = float64(res.Completed) / res.Makespan.Seconds()
		}
	}
	var hits, queries uint64
	computed := make([]float64, len(r.engines))
	for i, e := range r.engines {
		st := e.Stats()
		hits += st.PrefixCacheHits
		queries += st.PrefixCacheQueries
		computed[i] = float64(st.PrefixCacheQueries - st.PrefixCacheHits)
		res.Preemptions += st.Preemptions
	}
	if queries > 0 {
		res.HitRate = float64(hits) / float64(queries)
	}
	if r.oracleQueries > 0 {
		res.InfiniteHitRate = float64(r.oracleHits) / float64(r.oracleQueries)
		hits := beladyHits(r.bound.refs, r.bound.counted, r.cfg.CacheBlocks())
		res.BoundHitRate = float64(int64(hits)*int64(r.cfg.Fleet.BlockSize)) / float64(r.oracleQueries)
		lhits, shape := lruBoundHits(&r.bound, len(r.engines), r.cfg.Fleet.NumGPUBlocks)
		res.LRUBoundHitRate = float64(int64(lhits)*int64(r.cfg.Fleet.BlockSize)) / float64(r.oracleQueries)
		res.LRUShape = shape.export(r.cfg.Fleet.NumGPUBlocks, len(r.engines))
		lru := pooledLRUHits(r.bound.refs, r.bound.counted, r.cfg.CacheBlocks())
		res.PooledLRUHitRate = float64(int64(lru)*int64(r.cfg.Fleet.BlockSize)) / float64(r.oracleQueries)
	}
	res.Imbalance = imbalance(computed)
	if r.audit != nil {
		res.Misses = r.audit.result(r.oracleQueries, res.HitRate, res.BoundHitRate, res.InfiniteHitRate)
	}

	if r.events != nil {
		t := r.events.totals
		res.EventsApplied = t.Stored + t.Removed + t.Cleared
		res.EventsDropped = t.Dropped + t.Skipped + r.events.decodeErrors
	}
	return res
}

// percentile returns the q-quantile of ds (nearest rank), 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// imbalance is max/mean of xs (1 when all are equal or all zero).
func imbalance(xs []float64) float64 {
	sum, hi := 0.0, 0.0
	for _, x := range xs {
		sum += x
		hi = max(hi, x)
	}
	if sum == 0 {
		return 1
	}
	return hi / (sum / float64(len(xs)))
}
