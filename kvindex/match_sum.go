package kvindex

// AddTo adds every candidate's Blocks(i) to blocks[i] and Score(i) to
// scores[i] (both at least Len() long) in one pass, for a caller that sums
// the matches of a request's prompts: the records are decoded once for
// all candidates instead of once per accessor call.
func (r *MatchResult) AddTo(blocks []int, scores []float64) {
	s := &r.s
	n := s.n
	blocks, scores = blocks[:n], scores[:n]
	w := s.wGPU
	// More than 64 candidates, or counts an engine's block size or an
	// endpoint's non-prefix cache groups cap: each record through entry,
	// which applies the caps the raw masks below do not.
	if s.wide || s.anyEBS || s.hyDone {
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
		if b < 0 {
			continue // unknown to the index: nothing held
		}
		k := int(s.blk[b&63])
		blocks[i] += k
		if s.excSeen&(1<<uint(b&63)) != 0 {
			a := &s.acc[b&63]
			scores[i] += float64(k-int(a.n))*w + a.score
		} else {
			scores[i] += float64(k) * w
		}
	}
}
