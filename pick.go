package kvroute

import (
	"github.com/cespare/xxhash/v2"

	"github.com/kvroute/kvroute/kvindex"
)

// The pick stage takes the kept candidate with the highest total score.
//
// Ties between equally scored candidates are broken by rendezvous hashing:
// each tied endpoint is ranked by a hash of the request's tie key and the
// endpoint's ID, and the highest rank wins. The tie key is the request's
// first block beyond the longest prefix any kept candidate holds (its first
// new block), or its last block when a candidate holds every block.
//
// Three properties follow, and a random draw has none of them:
//   - every router replica (and every rerun) breaks the same request's tie
//     the same way from the same state, so two replicas that receive one new
//     prefix before either has heard of the other's decision still send it
//     to one endpoint, and R replicas that share their state exactly decide
//     as one router would;
//   - requests that share their first new block (one new document, one new
//     conversation, asked about several times) rank the endpoints alike, so
//     a burst of them lands on one endpoint while the loads are even;
//   - requests with different new blocks rank the endpoints independently,
//     so ties spread uniformly over the fleet, as random ones would.
//
// With Config.LoadTieTolerance, every kept candidate whose score is within
// the tolerance of the highest counts as tied with it, and the same ranking
// chooses among them: a pick decided by load then changes only when the
// loads that one router and a replica with a slightly older view see differ
// by more than the tolerance near the winner, not whenever the least-loaded
// endpoint differs.
//
// A request without block keys (its render failed, or its prompt is shorter
// than one block) has no tie key; its ties are broken with Options.Random,
// exact ties only.

// tieKey returns the tie key of the request among the kept candidates, and
// false when it has no block keys. For a request of several prompts the
// candidates' block counts are summed over its prompts and its keys are
// concatenated, so the key is the block at that position of the
// concatenation: still the same on every router.
func (s *Selection) tieKey(kept []int) (kvindex.Key, bool) {
	keys := s.st.keys
	if len(keys) == 0 {
		return 0, false
	}
	d := 0
	for _, i := range kept {
		d = max(d, s.st.blocks[i])
	}
	return keys[min(d, len(keys)-1)], true
}

// tieRank is an endpoint's rank for tie key k: the endpoint ID's XXH64
// combined with k through a 64-bit avalanche mix, so that nearby keys give
// unrelated orders. Never 0, so 0 can mean "not ranked yet".
func tieRank(k kvindex.Key, id string) uint64 {
	h := xxhash.Sum64String(id) ^ uint64(k)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h | 1
}

// bestOf returns the kept candidate with the highest score, ties broken as
// described above, and its score. It finds the highest score first and
// ranks only the candidates tied with it (at it, or within the tolerance
// below it), so a tie between lower scores costs no hashing.
func (s *Selection) bestOf(kept []int) (best int, score float64) {
	scores := s.st.scores
	best, ties := -1, 0
	for _, i := range kept {
		switch sc := scores[i]; {
		case best < 0 || sc > score:
			best, score, ties = i, sc, 1
		case sc == score:
			ties++
		}
	}
	floor := score
	if per := s.r.pipe.tiePerToken; per > 0 && best >= 0 {
		floor = score - per*float64(max(s.uncached(best), 0))
	}
	if ties <= 1 && floor == score {
		return best, score
	}
	key, hashed := s.tieKey(kept)
	if !hashed {
		if ties <= 1 {
			return best, score
		}
		return s.bestOfRandom(kept)
	}
	bestRank := tieRank(key, s.eps[best].ID)
	for _, i := range kept {
		if i != best && scores[i] >= floor {
			if rk := tieRank(key, s.eps[i].ID); rk > bestRank {
				best, bestRank = i, rk
			}
		}
	}
	return best, scores[best]
}

// bestOfRandom is bestOf for a request without block keys: reservoir
// sampling over the candidates tied at the best score so far, each tied
// endpoint winning with probability 1/ties, one Options.Random draw per tie.
func (s *Selection) bestOfRandom(kept []int) (best int, score float64) {
	scores := s.st.scores
	best, ties := -1, 0
	for _, i := range kept {
		switch sc := scores[i]; {
		case best < 0 || sc > score:
			best, score, ties = i, sc, 1
		case sc == score:
			ties++
			if s.r.random()*float64(ties) < 1 {
				best = i
			}
		}
	}
	return best, score
}
