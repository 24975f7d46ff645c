package kvindex

// AddTo adds every candidate's Blocks(i) to blocks[i] and Score(i) to
// scores[i] (both at least Len() long) in one pass, for a caller that sums
// the matches of a request's prompts: one decode of each candidate's record
// instead of one per accessor.
func (r *MatchResult) AddTo(blocks []int, scores []float64) {
	n := r.s.n
	blocks, scores = blocks[:n], scores[:n]
	w := r.s.wGPU
	for i := range n {
		k, a := r.s.entry(i)
		blocks[i] += k
		if a == nil {
			scores[i] += float64(k) * w
		} else {
			scores[i] += float64(k-int(a.n))*w + a.score
		}
	}
}
