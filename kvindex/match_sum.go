package kvindex

// AddTo adds every candidate's Blocks(i) to blocks[i] and Score(i) to
// scores[i] (both at least Len() long) in one pass, for a caller that sums
// the matches of a request's prompts: the records are decoded once for
// all candidates instead of once per accessor call.
func (r *MatchResult) AddTo(blocks []int, scores []float64) { r.sumInto(blocks, scores, true) }

// CopyTo is AddTo onto zeros: it writes every candidate's Blocks(i) to
// blocks[i] and Score(i) to scores[i] (both at least Len() long), so that a
// caller summing a request's prompts need not clear its sums before the
// first.
func (r *MatchResult) CopyTo(blocks []int, scores []float64) { r.sumInto(blocks, scores, false) }

// sumInto is AddTo (add) or CopyTo. CopyTo's scores are 0 + Score(i), as
// AddTo's onto a zero would be (the sign of a zero included).
func (r *MatchResult) sumInto(blocks []int, scores []float64, add bool) {
	s := &r.s
	n := s.n
	blocks, scores = blocks[:n], scores[:n]
	w := s.wGPU
	if s.wide {
		if !add {
			clear(blocks)
			clear(scores)
		}
		for i := range n {
			k, a := s.entry(i)
			blocks[i] += k
			if a == nil {
				scores[i] += float64(k) * w
			} else {
				scores[i] += float64(k-int(a.n))*w + a.score
			}
		}
		return
	}
	if !s.decoded {
		s.decode()
	}
	for i, b := range s.pos[:n] { // at most 64 candidates here
		k, sc := 0, 0.0
		if b >= 0 { // else unknown to the index: nothing held
			k = int(s.blk[b&63])
			if s.excSeen&(1<<uint(b&63)) != 0 {
				a := &s.acc[b&63]
				sc = float64(k-int(a.n))*w + a.score
			} else {
				sc = float64(k) * w
			}
		}
		if add {
			blocks[i] += k
			scores[i] += sc
		} else {
			blocks[i], scores[i] = k, 0+sc
		}
	}
}
