package disagg

import (
	"github.com/kvroute/kvroute"
)

// decodePick returns the decode candidate of ds with the best decode score
// among those the router's filters keep: the cached share of the prompt
// (DecodeCacheWeight) plus the free share of its decode capacity
// (DecodeLoadWeight × (1 − min(open requests, DecodeQueueRequests) /
// DecodeQueueRequests)). A decode endpoint's load is its open requests,
// not the prompt tokens it would prefill: when the request is split it
// prefills none of them. Ties go to the earlier candidate; -1 when the
// filters kept none.
func (p *Profile) decodePick(ds *kvroute.Selection, st stager) int {
	kept, _ := ds.Filter()
	prompts, _ := st.Prompts(ds)
	total := promptTokens(prompts)
	best, bestScore := -1, 0.0
	for _, i := range kept {
		s := p.decodeScore(ds.Candidate(i), total)
		if best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// decodeScore is candidate c's decode score for a prompt of total tokens.
func (p *Profile) decodeScore(c kvroute.Candidate, total int64) float64 {
	var cached float64
	if total > 0 {
		cached = 1 - float64(min(max(c.UncachedTokens, 0), total))/float64(total)
	}
	q := p.cfg.DecodeQueueRequests
	free := 1 - float64(min(max(c.OpenRequests, 0), q))/float64(q)
	return p.cfg.DecodeCacheWeight*cached + p.cfg.DecodeLoadWeight*free
}

// decide is the decider: reasonUncached (split) when the decode endpoint
// would compute at least NonCachedTokens of a prompt of total tokens
// (every prompt with a negative threshold), otherwise the reason to
// prefill locally.
func (p *Profile) decide(uncached, total int64) int {
	switch {
	case total == 0:
		return reasonNoTokens
	case p.cfg.NonCachedTokens < 0:
		return reasonUncached
	case uncached >= p.cfg.NonCachedTokens:
		return reasonUncached
	}
	return reasonCached
}
