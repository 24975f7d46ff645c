package kvindex

import "math/bits"

// Len returns the number of candidates of the last Match (0 before any and
// after Reset).
func (r *MatchResult) Len() int { return r.s.n }

// Reset empties r (Len 0) while keeping its buffers and its cached
// resolution of candidate names, so that a caller that skips Match for a
// request sees no stale results.
func (r *MatchResult) Reset() { r.s.n, r.Total = 0, 0 }

// Endpoint returns candidate i as passed to Match.
func (r *MatchResult) Endpoint(i int) string { return r.s.cands[:r.s.n][i] }

// Blocks returns how many blocks from block 0 candidate i holds
// contiguously (EndpointMatch.Blocks), without decoding the rest of its
// record.
func (r *MatchResult) Blocks(i int) int {
	n, _ := r.s.entry(i)
	return n
}

// Score returns candidate i's tier-weighted contiguous score
// (EndpointMatch.Score).
func (r *MatchResult) Score(i int) float64 {
	n, a := r.s.entry(i)
	if a == nil {
		return float64(n) * r.s.wGPU
	}
	return float64(n-int(a.n))*r.s.wGPU + a.score
}

// Speculative returns how many of candidate i's contiguous blocks it holds
// only speculatively (EndpointMatch.Speculative), without decoding the
// rest of its record.
func (r *MatchResult) Speculative(i int) int {
	if _, a := r.s.entry(i); a != nil {
		return int(a.spec)
	}
	return 0
}

// At returns candidate i's full match record. It panics when i is not in
// [0, Len()).
func (r *MatchResult) At(i int) EndpointMatch {
	n, a := r.s.entry(i)
	e := EndpointMatch{Endpoint: r.s.cands[i], Blocks: n}
	if a == nil {
		e.Score, e.GPU = float64(n)*r.s.wGPU, n
		return e
	}
	std := n - int(a.n)
	e.Score, e.Speculative = float64(std)*r.s.wGPU+a.score, int(a.spec)
	e.GPU, e.CPU, e.Storage, e.Other = std+int(a.gpu), int(a.cpu), int(a.storage), int(a.other)
	return e
}

// Endpoints returns every candidate's record, in candidate order, in a
// buffer r reuses: valid until the next Match, Reset or Endpoints call on
// r. It allocates only when the buffer grows. Callers that need one or two
// fields of each candidate are better served by Blocks and Score, which
// decode nothing else.
func (r *MatchResult) Endpoints() []EndpointMatch {
	n := r.s.n
	if cap(r.all) < n {
		r.all = make([]EndpointMatch, n)
	}
	r.all = r.all[:n]
	for i := range r.all {
		r.all[i] = r.At(i)
	}
	return r.all
}

// entry returns candidate i's contiguous block count and, when some of
// those blocks were not confirmed GPU copies, its exception accumulator
// (nil otherwise). It panics when i is not in [0, n).
func (s *matchScratch) entry(i int) (int, *excAcc) {
	n, a := s.entryRaw(i)
	if s.anyEBS {
		n, a = s.capEntry(i, n, a)
	}
	if s.hyDone && s.hy[i] != nil {
		n, a = s.limitEntry(int(s.hyL[i]), n, a)
	}
	return n, a
}

// entryRaw is entry before the engine block cap (engine_blocks.go).
func (s *matchScratch) entryRaw(i int) (int, *excAcc) {
	_ = s.cands[:s.n][i]
	if s.wide {
		c := int(s.first[i])
		if s.ids[c] == 0 {
			return 0, nil
		}
		n := int(s.wblk[c+1])
		if a := &s.wacc[c+1]; a.n != 0 {
			return n, a
		}
		return n, nil
	}
	b := s.pos[i]
	if b < 0 {
		return 0, nil
	}
	if !s.decoded {
		s.decode()
	}
	n := int(s.blk[b&63])
	if s.excSeen&(1<<uint(b&63)) != 0 {
		return n, &s.acc[b&63]
	}
	return n, nil
}

// decode fills blk from the walk's alive masks: a bit's count is the first
// depth whose mask lacks it, walked for the bits alive at the end.
func (s *matchScratch) decode() {
	prev := s.alive
	for i, a := range s.depth[:s.walked] {
		for died := prev &^ a; died != 0; died &= died - 1 {
			s.blk[bits.TrailingZeros64(died)] = int32(i)
		}
		prev = a
	}
	for ; prev != 0; prev &= prev - 1 {
		s.blk[bits.TrailingZeros64(prev)] = int32(s.walked)
	}
	s.decoded = true
}
