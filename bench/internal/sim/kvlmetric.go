package sim

import (
	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/kvindex"
)

// lmetricScoring configures a kvroute.Router to choose the LMetric way
// (lmetric.go) through its public extension points, with kvroute's own
// index, speculative entries and load accounting as the inputs: the
// affinity filter off (threshold 0), and the score
//
//	cost(i)  = (uncached tokens(i) + 1) × (open requests(i) + 1)
//	score(i) = min over kept candidates of cost ÷ cost(i)
//
// so the candidate of least cost scores 1; the +1 on the tokens keeps a
// fully cached prompt's cost proportional to its endpoint's load. Ties go
// to the endpoint whose cache holds the fewest blocks (a scorer of weight
// tieWeight, as LMetric's peers break theirs), the token-load scorer at a
// weight of loadWeight only separating what is still equal. It is the
// experiment behind the policy KVRouteLMetric: how kvroute would do scoring
// as the LMetric peers do, with everything else its own.
type lmetricScoring struct {
	ix       *kvindex.Index // set once the Router is built
	capacity float64        // an engine's KV blocks
}

const (
	lmetricTieWeight  = 1e-3
	lmetricLoadWeight = 1e-6
)

// newLMetricScoring sets rc and opts for LMetric scoring and returns the
// scoring, whose index the caller sets once the Router exists.
func newLMetricScoring(cfg Config, rc *kvroute.Config, opts *kvroute.Options) *lmetricScoring {
	l := &lmetricScoring{capacity: float64(max(cfg.Fleet.NumGPUBlocks, 1))}
	rc.Affinity.AffinityThreshold = new(0.0)
	rc.LoadWeight = lmetricLoadWeight
	opts.Scorers = append(opts.Scorers,
		kvroute.WeightedScorer{Scorer: lmetricScorer{}, Weight: 1},
		kvroute.WeightedScorer{Scorer: fewestBlocksScorer{l}, Weight: lmetricTieWeight})
	return l
}

// lmetricScorer is LMetric's cost as a kvroute.Scorer (see lmetricScoring).
type lmetricScorer struct{}

// lmetricCost is candidate c's LMetric cost.
func lmetricCost(c kvroute.Candidate) float64 {
	return float64(max(c.UncachedTokens, 0)+1) * float64(max(c.OpenRequests, 0)+1)
}

// Score rates candidate i by the least cost among the kept candidates over
// its own.
func (lmetricScorer) Score(s *kvroute.Selection, i int) float64 {
	own := lmetricCost(s.Candidate(i))
	least := own
	for j := range s.Len() {
		if c := s.Candidate(j); c.Kept {
			least = min(least, lmetricCost(c))
		}
	}
	return least / own
}

// fewestBlocksScorer prefers the endpoint whose cache, as the index sees
// it, holds the fewest blocks: 1 − blocks ÷ capacity.
type fewestBlocksScorer struct{ l *lmetricScoring }

// Score rates candidate i by the room left in its cache.
func (f fewestBlocksScorer) Score(s *kvroute.Selection, i int) float64 {
	if f.l.ix == nil {
		return 0
	}
	return 1 - float64(f.l.ix.EndpointBlocks(s.Candidate(i).Endpoint.ID))/f.l.capacity
}
