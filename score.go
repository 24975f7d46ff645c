package kvroute

import (
	"math"

	"github.com/kvroute/kvroute/tokenload"
)

// Score is the scoring stage: every kept candidate's token-load score times
// Config.LoadWeight plus each extra scorer's weighted, clamped score. It
// returns the best candidate and its score. Ties go to the candidate that
// ranks highest for this request: a hash of the request's first new block
// (the first block beyond the longest prefix any kept candidate holds) and
// the endpoint's ID, the same on every router, so replicas agree and one new
// prefix stays on one endpoint; a request without block keys breaks its ties
// with Options.Random. It runs Filter first if needed, and runs once.
func (s *Selection) Score() (best int, score float64) {
	if s.scored {
		return s.best, s.bestScore
	}
	kept, _ := s.Filter()
	sp := s.child(SpanScore)
	r, st := s.r, &s.st
	for _, i := range kept {
		sc := r.cfg.LoadWeight * tokenload.Score(st.committed(i), st.uncached[i], r.cfg.QueueThresholdTokens)
		for _, ws := range r.scorers {
			m := s.matchOf(i)
			sc += ws.Weight * clamp01(ws.Scorer.Score(s.req, s.eps[i], &m))
		}
		st.scores[i] = sc
	}
	best, score = s.bestOf(kept)
	s.best, s.bestScore, s.scored = best, score, true
	if sp != nil {
		s.traceScore(sp)
	}
	return best, score
}

// ScoreOf returns candidate i's total score and whether it was scored (it
// was kept by the filter), running Score if it has not run.
func (s *Selection) ScoreOf(i int) (float64, bool) {
	s.Score()
	if !s.Kept(i) {
		return 0, false
	}
	return s.st.scores[i], true
}

// committed is candidate i's load in the token-load score: its committed
// in-flight tokens plus the token-equivalent load of its open requests
// (Config.OpenRequestTokens each), saturating at math.MaxInt64.
func (st *pickState) committed(i int) int64 {
	tok := max(st.cands[i].InFlightTokens, 0)
	return tok + min(st.open[i], math.MaxInt64-tok)
}

func clamp01(v float64) float64 {
	switch {
	case v > 1:
		return 1
	case v >= 0:
		return v
	default:
		return 0 // negative and NaN
	}
}
