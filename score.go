package kvroute

import (
	"math"

	"github.com/kvroute/kvroute/tokenload"
)

// Scorer is the score stage's extension point: it rates one candidate of a
// request that the filters kept. Score returns a value in [0, 1] for
// candidate i of s (values outside are clamped, NaN counts as 0); the stage
// adds it, times its weight, to the candidate's total score, and the pick
// stage takes the highest total. It must be safe for concurrent use, and
// should allocate nothing: it runs once per kept candidate of every request.
type Scorer interface {
	Score(s *Selection, i int) float64
}

// WeightedScorer is a Scorer with its weight in the sum of scores.
type WeightedScorer struct {
	Scorer Scorer
	Weight float64
}

// Score is the score stage: every kept candidate's total score, the sum of
// the router's weighted scorers (the token-load scorer times
// Config.LoadWeight, then Options.Scorers), each clamped to [0, 1]. It
// returns the pick stage's answer: the best candidate and its score (-1
// when the filters kept none). Ties go to the rendezvous hash of the
// request's first new block and each endpoint's ID, the same on every
// router replica (within Config.LoadTieTolerance, when set), or to
// Options.Random for a request without block keys. It runs Filter first if
// needed, and runs once.
func (s *Selection) Score() (best int, score float64) {
	if s.scored {
		return s.best, s.bestScore
	}
	kept, _ := s.Filter()
	sp := s.child(spanScore)
	scorers, st := s.r.pipe.scorers, &s.st
	if tl, only := scorers[0].Scorer.(tokenLoadScorer); only && len(scorers) == 1 {
		// The token-load scorer alone (no Options.Scorers): called
		// directly, without an interface call per candidate.
		tl.scoreKept(s, kept, scorers[0].Weight)
	} else {
		for _, i := range kept {
			var sc float64
			for k, ws := range scorers {
				v := ws.Weight * clamp01(ws.Scorer.Score(s, i))
				if k == 0 {
					sc = v
				} else {
					sc += v
				}
			}
			st.scores[i] = sc
		}
	}
	best, score = s.bestOf(kept)
	s.best, s.bestScore, s.scored = best, score, true
	if sp != nil {
		s.traceScore(sp)
	}
	return best, score
}

// tokenLoadScorer is the token-load scorer (tokenload.Score): how much room
// a candidate has left below Config.QueueThresholdTokens once this request's
// uncached tokens join its committed load. The committed load is the
// candidate's in-flight tokens plus the token-equivalent load of its open
// requests (Config.OpenRequestTokens each), saturating at math.MaxInt64.
type tokenLoadScorer struct {
	queueThreshold    int64
	openRequestTokens int64
}

// Score rates candidate i by its load.
func (t tokenLoadScorer) Score(s *Selection, i int) float64 {
	st := &s.st
	return t.score(st.cands[i].InFlightTokens, st.open[i], s.uncached(i))
}

// scoreKept writes w times each kept candidate's clamped Score to
// st.scores: the score stage's loop when the token-load scorer is the only
// one, with the Selection's slices read once and score written out in the
// loop (a call per candidate would keep the loop's state on the stack;
// TestScoreKeptIsScore holds the two to one answer).
func (t tokenLoadScorer) scoreKept(s *Selection, kept []int, w float64) {
	st := &s.st
	cands, open, weighted, scores, unc := st.cands, st.open, st.weighted, st.scores, s.unc
	q, per := t.queueThreshold, t.openRequestTokens
	for _, i := range kept {
		tok := max(cands[i].InFlightTokens, 0)
		o := tokenload.OpenRequestLoad(open[i], per)
		scores[i] = w * clamp01(tokenload.Score(tok+min(o, math.MaxInt64-tok), unc.Of(weighted[i]), q))
	}
}

// score is the token-load score of a candidate with inflight committed
// tokens and open requests, for a request that would add uncached tokens.
func (t tokenLoadScorer) score(inflight, open, uncached int64) float64 {
	tok := max(inflight, 0)
	o := tokenload.OpenRequestLoad(open, t.openRequestTokens)
	return tokenload.Score(tok+min(o, math.MaxInt64-tok), uncached, t.queueThreshold)
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
