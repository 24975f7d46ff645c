package affinity

import (
	"math"

	"github.com/kvroute/kvroute/tokenload"
)

// crowdingCost is a candidate's cost in the crowding rule: (uncached tokens
// of this request + 1) × (open requests + 1). The uncached tokens are
// c.RequestTokens, or projected from c.Score through unc when given
// (ApplyProjected). The +1s are added as floats: in int64 they overflow
// at math.MaxInt64, giving the most crowded endpoint a negative cost.
func crowdingCost(c *Candidate, unc *tokenload.Uncached) float64 {
	return (float64(uncachedOf(c, unc)) + 1) * (float64(max(c.OpenRequests, 0)) + 1)
}

// uncachedOf is a candidate's uncached tokens for this request: its
// RequestTokens, or projected from its Score through unc when given.
func uncachedOf(c *Candidate, unc *tokenload.Uncached) int64 {
	if unc != nil {
		return projectUncached(unc, c.Score)
	}
	return max(c.RequestTokens, 0)
}

// projectUncached is the uncached tokens unc projects for a matched score,
// a NaN, infinite or negative score counting as no match (Candidate.Score):
// unc.Of clamps +Inf to a full match, no uncached tokens at all.
func projectUncached(unc *tokenload.Uncached, score float64) int64 {
	if math.IsInf(score, 0) || math.IsNaN(score) {
		score = 0
	}
	return max(unc.Of(score), 0)
}

// moveLimit is the most uncached tokens a crowded request may have on its
// destination: the warmest sticky candidate's plus the extra prefill the
// rule may add (Config.CrowdingMaxExtraPrefill), or +Inf when unbounded or
// when the crowding is severe (Config.CrowdingUnboundRatio: lift).
func (f *Filter) moveLimit(need float64, cands []Candidate, unc *tokenload.Uncached, lift bool) float64 {
	if f.extraTokens <= 0 || lift {
		return math.Inf(1)
	}
	least := math.Inf(1)
	for i := range cands {
		if c := &cands[i]; c.LoadKnown && sticky(c.Score, need) {
			least = min(least, float64(uncachedOf(c, unc)))
		}
	}
	return least + f.extraTokens
}

// severe reports whether the crowding is severe enough to lift the bound on
// the extra prefill (Config.CrowdingUnboundRatio): the sticky side's fewest
// open requests + 1 reach the ratio times the non-sticky side's fewest + 1.
// Either side without a known load (math.MaxInt64) is never severe.
func (f *Filter) severe(openSticky, openCold int64) bool {
	if f.unbound <= 0 || openSticky == math.MaxInt64 || openCold == math.MaxInt64 {
		return false
	}
	return float64(openSticky)+1 >= f.unbound*(float64(openCold)+1)
}

// crowded reports whether the cheapest non-sticky candidate with a known
// load, within the move limit (moveLimit, which it returns for
// leastCrowded), costs less than the crowding ratio times the cheapest
// sticky one. stickies are the sticky candidates' indices and sd what
// decide's pass gathered. With a projection (unc), the
// cold side is first bounded without reading it: no non-sticky candidate
// has a better match than maxCold nor fewer open requests than openCold, and
// the projected uncached tokens never grow with the match, so none costs
// less than that pair would; when even that is not cheap enough, the answer
// is no. A +Inf maxCold (a score of no match) skips the bound.
func (f *Filter) crowded(need float64, cands []Candidate, stickies []int, unc *tokenload.Uncached, sd sides) (limit float64, ok bool) {
	const none = math.MaxFloat64
	openCold, maxCold := sd.openCold, sd.maxCold
	crowdSticky := none
	for _, i := range stickies {
		if c := &cands[i]; c.LoadKnown {
			crowdSticky = min(crowdSticky, crowdingCost(c, unc))
		}
	}
	bound := f.crowding * crowdSticky
	// A +Inf maxCold is a candidate of no match (Candidate.Score) and bounds
	// nothing: the others' matches are then not known to be below any.
	if unc != nil && !math.IsInf(maxCold, 1) && (float64(projectUncached(unc, maxCold))+1)*(float64(openCold)+1) >= bound {
		return 0, false
	}
	limit = f.moveLimit(need, cands, unc, f.severe(sd.openSticky, openCold))
	for i := range cands {
		if c := &cands[i]; c.LoadKnown && !sticky(c.Score, need) && crowdingCost(c, unc) < bound && float64(uncachedOf(c, unc)) <= limit {
			return limit, true
		}
	}
	return 0, false
}

// leastCrowded appends to dst the indices of the non-sticky candidates with
// a known load, within crowded's move limit, whose crowding cost is the
// least (ties all pass, for the scorers to separate).
func (f *Filter) leastCrowded(dst []int, totalBlocks int, cands []Candidate, unc *tokenload.Uncached, limit float64) []int {
	need := f.need(totalBlocks)
	least := math.MaxFloat64
	for i := range cands {
		if c := &cands[i]; c.LoadKnown && !sticky(c.Score, need) && float64(uncachedOf(c, unc)) <= limit {
			least = min(least, crowdingCost(c, unc))
		}
	}
	for i := range cands {
		if c := &cands[i]; c.LoadKnown && !sticky(c.Score, need) && float64(uncachedOf(c, unc)) <= limit && crowdingCost(c, unc) == least {
			dst = append(dst, i)
		}
	}
	return dst
}
