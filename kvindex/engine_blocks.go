package kvindex

// An engine whose block size E is not the index's block size R is indexed
// at R (kvevents re-chunks its events), but it reuses only whole blocks of
// its own, and a router block that holds the same tokens as part of one of
// its blocks says nothing about that block's tokens beyond it: a sibling
// chain (a prompt sharing the tokens up to the router block's end and
// differing after) may hold it. What n contiguous router blocks guarantee
// is the engine blocks that end within them: ⌊n·R/E⌋ of them, all of whose
// tokens the keys cover. Match therefore rounds such an endpoint's
// contiguous count down to the router blocks within those engine blocks,
// ⌊⌊n·R/E⌋·E/R⌋. That is exact when either size is a multiple of the
// other (E = k·R: n rounded down to a multiple of k; R = k·E: n); when
// neither divides the other it is a lower bound, below the engine's
// reusable prefix by at most the router blocks of one engine block plus
// one.

// SetEngineBlockSize records that endpoint's engine caches blocks of n
// tokens, so that Match rounds its matches down to whole engine blocks
// (see above). n equal to the index's block size, or n <= 0, removes the
// record. Clear forgets it too. kvevents' Applier calls it for the
// endpoints whose events it re-chunks.
func (ix *Index) SetEngineBlockSize(endpoint string, n int) {
	if n <= 0 || n == ix.blockSize {
		if _, ok := ix.engBS.LoadAndDelete(endpoint); ok {
			ix.gen.Add(1)
		}
		return
	}
	if old, ok := ix.engBS.Load(endpoint); ok && old == n {
		return
	}
	ix.engBS.Store(endpoint, n)
	ix.gen.Add(1) // Match results re-resolve their candidates, and with them the caps
}

// EngineBlockSize returns the engine block size recorded for endpoint
// (SetEngineBlockSize), or the index's block size.
func (ix *Index) EngineBlockSize(endpoint string) int {
	if n, ok := ix.engBS.Load(endpoint); ok {
		return n
	}
	return ix.blockSize
}

// resolveEngineBlocks fills s.ebs, per candidate, with its endpoint's engine
// block size when that differs from the index's (0 otherwise), and sets
// s.anyEBS when any does. Called by resolve.
func (s *matchScratch) resolveEngineBlocks(ix *Index, cands []string) {
	s.anyEBS = false
	if ix.engBS.Size() == 0 {
		return
	}
	if cap(s.ebs) < len(cands) {
		s.ebs = make([]int32, len(cands))
	}
	s.ebs = s.ebs[:len(cands)]
	for i, name := range cands {
		s.ebs[i] = 0
		if n, ok := ix.engBS.Load(name); ok {
			s.ebs[i], s.anyEBS = int32(n), true
		}
	}
}

// capEntry rounds candidate i's contiguous count n down to its whole
// engine blocks (see above) and scales its accumulator a to the blocks
// kept (which of its blocks were the exceptions is not recorded).
func (s *matchScratch) capEntry(i, n int, a *excAcc) (int, *excAcc) {
	e, bs := int(s.ebs[i]), s.ix.blockSize
	if e == 0 {
		return n, a
	}
	return s.limitEntry((n*bs/e)*e/bs, n, a)
}

// limitEntry limits a candidate's contiguous count n to c, scaling its
// accumulator a to the blocks kept (which of its blocks were the
// exceptions is not recorded).
func (s *matchScratch) limitEntry(c, n int, a *excAcc) (int, *excAcc) {
	if c >= n {
		return n, a
	}
	if a == nil || n == 0 {
		return c, a
	}
	f := func(v int32) int32 { return int32(int64(v) * int64(c) / int64(n)) }
	s.capped = excAcc{n: f(a.n), gpu: f(a.gpu), cpu: f(a.cpu), storage: f(a.storage), other: f(a.other), spec: f(a.spec),
		score: a.score * float64(c) / float64(n)}
	return c, &s.capped
}
