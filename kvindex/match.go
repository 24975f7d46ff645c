package kvindex

import (
	"bytes"
	"math/bits"
	"time"
	"unsafe"
)

// EndpointMatch is one candidate's longest-prefix match, as
// MatchResult.At returns it.
type EndpointMatch struct {
	Endpoint string  // the candidate, as passed to Match
	Blocks   int     // contiguous blocks from block 0 held (any tier, speculative included)
	Score    float64 // tier-weighted contiguous score: per block the highest weight held, summed (not truncated)
	// Contiguous blocks per tier class: GPU ("gpu"), CPU ("cpu",
	// "cpu_pinned"), Storage ("storage", "disk") and Other (any other
	// medium). A block held in two tiers counts in both.
	GPU, CPU, Storage, Other int
	Speculative              int // contiguous blocks held only speculatively
}

// MatchResult receives the result of Match: one EndpointMatch per
// candidate, in candidate order, read through Len, Blocks, Score, At and
// Endpoints. Match does not write a record per candidate: it keeps the set
// of candidates still matching after each block (up to 64 candidates; one
// word per block) or each candidate's count (more), plus accumulators for
// the few blocks held other than as a confirmed GPU copy, and the readers
// derive the rest (the first reader decodes the sets once), so a Match over
// many candidates costs little more than its lookups. Results stay valid until the next Match or Reset on the same
// MatchResult.
//
// Reusing one MatchResult (per goroutine) makes Match allocation-free;
// reusing it with the same candidate slice also skips resolving the
// candidate names. A MatchResult is not safe for concurrent use, its readers
// included (the first one after a Match decodes the walk).
type MatchResult struct {
	Total int // len(keys) of the last Match

	s   matchScratch
	all []EndpointMatch // Endpoints' buffer
}

// matchScratch caches the resolution of candidate names to endpoint IDs and
// holds the per-candidate accumulators the readers of MatchResult decode.
type matchScratch struct {
	ix    *Index
	gen   uint64
	n     int      // candidates of the last Match (0 after Reset)
	cands []string // the candidates the cache was built for
	ids   []uint32 // per candidate: endpoint ID, 0 when unknown
	first []int32  // per candidate: index of the first candidate with its ID
	slot  []int32  // per endpoint ID: candidate index + 1, 0 when not a candidate
	wide  bool     // the last Match had more than 64 candidates (matchWide)
	// Engines of another block size (engine_blocks.go): per candidate its
	// engine block size (0 = the index's), whether any has one, and the
	// scaled accumulator of a candidate whose count was rounded down.
	ebs    []int32
	anyEBS bool
	capped excAcc
	// Endpoints with non-prefix cache groups (groups_match.go): per
	// candidate its groups (nil for none), whether any has some, and the
	// longest usable prefix computed after the walk (valid when hyDone).
	hy     []*hybridEP
	hyL    []int32
	anyHy  bool
	hyDone bool
	wGPU   float64 // the GPU tier's weight when the last Match ran
	// bit holds, per endpoint ID, the candidate's bit within the chunk of
	// 64 candidates starting at bitBase (0 for other endpoints): the one
	// load the inner loop makes per membership. alive is the chunk's
	// candidates with a known endpoint (first occurrences only).
	bit     []uint64
	bitBase int
	alive   uint64
	// pos is, per chunk candidate, its bit (-1 when unknown). With rel,
	// bit j is endpoint ID relBase+j, matching the member arrays' standard
	// masks; otherwise bit j is candidate bitBase+j.
	pos     [64]int8
	rel     bool
	relBase uint32
	// depth[i] is the alive mask after block i, for the walked blocks: a
	// candidate's contiguous count is the first depth whose mask lacks its
	// bit (walked when none does). One store per block instead of one per
	// candidate; the masks only shrink, so readers binary-search them.
	depth  []uint64
	walked int
	// blk is, per bit, the contiguous count decoded from depth, filled by
	// the first reader after a Match (decoded), so that reading every
	// candidate costs one pass over the masks and Match none.
	blk     [64]int32
	decoded bool
	word    [64]uint64 // per bit: membership of the current block (exceptions only)
	acc     [64]excAcc // per bit: blocks not held as "confirmed, GPU only", valid when excSeen has the bit
	excSeen uint64

	// More than 64 candidates (matchWide), indexed by candidate index + 1
	// (the value slot holds; entry 0 is the sink of non-candidates):
	// wblk is the contiguous block count, wacc the exception accumulators;
	// wtouched lists the wacc entries the last walk wrote, which the next
	// one zeroes first.
	wblk     []int32
	wacc     []excAcc
	wtouched []int32
}

// excAcc accumulates a candidate's blocks that are not the common case
// (confirmed in the GPU tier only); the common blocks are derived from the
// contiguous count at the end.
type excAcc struct {
	n, gpu, cpu, storage, other, spec int32
	score                             float64
}

// addHeld counts one confirmed (not speculative) membership m: the weight of
// its best tier and each tier class it is held in.
func (a *excAcc) addHeld(tt *tierTable, m uint64) {
	mask := tierMaskOf(m)
	cls := tt.clsOf[mask]
	a.score += tt.maxW[mask]
	a.gpu += int32(cls & classGPU)
	a.cpu += int32(cls&classCPU) >> 1
	a.storage += int32(cls&classStorage) >> 2
	a.other += int32(cls&classOther) >> 3
}

// Match computes, for each candidate endpoint, how many blocks of keys it
// holds contiguously from block 0 (what the engine can actually reuse), its
// tier-weighted score and per-tier counts, into out (read them with
// out.Blocks, out.Score, out.At or out.Endpoints, in candidate order). The
// walk stops at the first block that no candidate holds; keys are looked up
// in batches of up to eight so that their lookups overlap, so a prompt
// whose first block misses costs at most one batch. Expired speculative
// entries count as absent. Unknown candidates match nothing.
//
// Match is safe at any time against concurrent writes. It takes no locks
// but the read lock of the non-prefix cache groups of a candidate with some
// (groups.go), which waits for that endpoint's group writers; with a reused
// out it allocates nothing.
func (ix *Index) Match(keys []Key, candidates []string, out *MatchResult) {
	if out == nil {
		return
	}
	var start time.Time
	if ix.met != nil {
		start = time.Now() // wall time: a reported duration of CPU work (see package telemetry)
	}
	out.Total = len(keys)
	tt := ix.tiers.Load()
	s := &out.s
	s.resolve(ix, candidates)
	s.n, s.wGPU = len(candidates), tt.maxW[1]
	var best int
	s.hyDone = false
	if len(candidates) <= 64 {
		s.wide = false
		best = ix.matchChunk(keys, out, tt)
	} else {
		s.wide = true
		best = ix.matchWide(keys, out, tt)
	}
	if s.anyHy {
		s.limitHybrid(keys, ix.blockSize)
	}
	if ix.met != nil {
		if s.anyHy || s.anyEBS {
			// The walk's best is before the engine-block and group
			// limits: the hits are the blocks Match reports.
			best = 0
			for i := range s.n {
				n, _ := s.entry(i)
				best = max(best, n)
			}
		}
		ix.met.observeLookup(best, time.Since(start))
	}
}

// matchChunk walks keys for up to 64 candidates and returns the highest
// contiguous block count among them. matchWide handles more.
//
// Each candidate has one bit of the masks (see setChunk). When the
// candidates' endpoint IDs span fewer than 64 (s.rel), bit j is endpoint ID
// relBase+j, the same numbering as a member array's standard mask, so a
// block's standard holders cost one load and a shift; otherwise they are
// scanned through the per-ID bit table. The keys go through presBatch eight
// at a time, which computes the common blocks' holders as it looks them
// up; the others take chunkPresence. A candidate's result is the block at
// which its bit left the alive mask (found in s.depth) and, when it held
// some blocks other than as a confirmed GPU copy, its accumulator (s.acc).
func (ix *Index) matchChunk(keys []Key, out *MatchResult, tt *tierTable) (best int) {
	s := &out.s
	s.setChunk(0, len(s.cands))
	alive := s.alive
	bit := s.bit
	rel, relBase := s.rel, s.relBase
	var excSeen uint64
	var now lazyNow
	if cap(s.depth) < len(keys) {
		s.depth = make([]uint64, len(keys)+len(keys)/4)
	}
	depth := s.depth[:len(keys)]
	var cb chunkBatch
	i, batch := 0, firstBatch
walk:
	for i < len(keys) && alive != 0 {
		want := min(len(keys)-i, batch)
		batch = probeBatch
		got, slow := ix.blocks.presBatch(keys[i:i+want], bit, rel, relBase, &cb)
		d := depth[i : i+got]
		for j := range d {
			pres, exc := cb.pres[j&(probeBatch-1)], uint64(0)
			if slow&(1<<uint(j)) != 0 {
				pres, exc = s.chunkPresence(&cb.vs[j&(probeBatch-1)], &now, ix)
			}
			if alive&^pres != 0 {
				best = i + j
			}
			alive &= pres
			d[j] = alive
			if exc&alive != 0 {
				excSeen = s.addExceptions(exc&alive, excSeen, tt, ix.specWeight)
			}
			if alive == 0 {
				i += j + 1
				break walk
			}
		}
		i += got
		if got < want {
			break // keys[i] is absent
		}
	}
	if alive != 0 {
		best = i
	}
	s.walked, s.excSeen, s.decoded = i, excSeen, false
	return best
}

// addExceptions adds one block to the accumulators of the candidates of ex
// (alive ones whose membership of the block, in s.word, is not the common
// "confirmed, GPU tier only" case), zeroing an accumulator on its first use
// in this Match (seen, returned updated).
func (s *matchScratch) addExceptions(ex, seen uint64, tt *tierTable, specWeight float64) uint64 {
	for ; ex != 0; ex &= ex - 1 {
		b := bits.TrailingZeros64(ex)
		a := &s.acc[b]
		if seen&(1<<uint(b)) == 0 {
			*a = excAcc{}
			seen |= 1 << uint(b)
		}
		a.n++
		m := s.word[b]
		if isSpec(m) {
			a.spec++
			a.score += specWeight
			continue
		}
		a.addHeld(tt, m)
	}
	return seen
}

// stdPresence ORs the chunk bits of the endpoints of std (standard
// memberships). It is the inner loop of Match over blocks held by many
// endpoints: four independent accumulators, and IDs beyond the table
// (endpoints registered after the candidates were resolved) clamped to its
// last entry, which is always zero, instead of a branch per membership.
func stdPresence(std []uint64, bit []uint64) uint64 {
	last := uint64(len(bit) - 1)
	base := unsafe.Pointer(unsafe.SliceData(bit))
	at := func(m uint64) uint64 { return *(*uint64)(unsafe.Add(base, 8*min(m&idMask, last))) }
	var p0, p1, p2, p3 uint64
	i := 0
	for ; i+4 <= len(std); i += 4 {
		q := std[i : i+4 : i+4]
		p0 |= at(q[0])
		p1 |= at(q[1])
		p2 |= at(q[2])
		p3 |= at(q[3])
	}
	for ; i < len(std); i++ {
		p0 |= at(std[i])
	}
	return p0 | p1 | p2 | p3
}

// maskPresence is stdPresence for the memberships of an implicit array:
// those of endpoints memberID(m0)+j for the set bits j of mask.
func maskPresence(mask, m0 uint64, bit []uint64) (p uint64) {
	id := m0 & idMask
	for ; mask != 0; mask &= mask - 1 {
		if x := id + uint64(bits.TrailingZeros64(mask)); x < uint64(len(bit)) {
			p |= bit[x]
		}
	}
	return p
}

// sameStrings reports whether a and b hold the same string values in
// memory (same lengths and data pointers, element by element), the test for
// a reused candidate list: one comparison of the two arrays of string
// headers as bytes, which the runtime does many words at a time.
func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	n := len(a) * int(unsafe.Sizeof(""))
	return bytes.Equal(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), n),
		unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), n))
}

// lazyNow is the index clock read at most once per Match, and only when a
// speculative membership needs it.
type lazyNow struct {
	ms   uint64
	have bool
}

func (n *lazyNow) get(ix *Index) uint64 {
	if !n.have {
		n.ms, n.have = ix.nowMs(), true
	}
	return n.ms
}

// chunkPresence returns the candidates of the current chunk holding the
// block of value v (pres) and those among them whose membership is not the
// common "confirmed, GPU tier only" case (exc, their words recorded in
// s.word): the general path behind presBatch, for every block shape it does
// not decode itself.
func (s *matchScratch) chunkPresence(v *blockVal, now *lazyNow, ix *Index) (pres, exc uint64) {
	bit := s.bit
	if v.many == nil {
		ms := [1]uint64{v.one}
		return s.scan(ms[:], bit, now, ix)
	}
	hdr := v.one
	nStd := int(hdr >> hdrStdShift & hdrStdMask)
	if s.rel && hdr&hdrNarrow != 0 {
		mask := v.stdMask()
		if d := int64(memberID(*v.many)) - int64(s.relBase); d >= 0 {
			pres = mask << uint64(d)
		} else {
			pres = mask >> uint64(-d)
		}
	} else if hdr&hdrImplicit != 0 {
		pres = maskPresence(v.stdMask(), *v.many, bit)
	} else if nStd > 0 {
		pres = stdPresence(memberSlice(v.many, nStd), bit)
	}
	if n := int(uint32(hdr)); n > nStd {
		p, e := s.scan(unsafe.Slice((*uint64)(unsafe.Add(unsafe.Pointer(v.many), 8*nStd)), n-nStd), bit, now, ix)
		pres, exc = pres|p, e
	}
	return pres, exc
}

// scan returns the candidates of the current chunk present in one block's
// memberships (pres) and those whose membership is not the common
// "confirmed, GPU tier only" case (exc), recording the latter's words.
func (s *matchScratch) scan(ms []uint64, bit []uint64, now *lazyNow, ix *Index) (pres, exc uint64) {
	for _, m := range ms {
		id := m & idMask
		if id >= uint64(len(bit)) {
			continue
		}
		b := bit[id]
		if isStd(m) {
			pres |= b
			continue
		}
		if b == 0 {
			continue
		}
		if isSpec(m) && specExpiry(m) <= now.get(ix) {
			continue
		}
		pres |= b
		exc |= b
		s.word[bits.TrailingZeros64(b)] = m
	}
	return pres, exc
}

// setChunk gives each candidate base … end-1 its bit (pos) and points the
// per-ID bit table and the alive mask at them. A candidate listed twice
// shares its first occurrence's bit; unknown candidates get none. When the
// known candidates' IDs span fewer than 64 and base is 0, bit j is
// endpoint ID relBase+j (rel); otherwise bit j is candidate base+j.
func (s *matchScratch) setChunk(base, end int) {
	if s.bitBase == base {
		return
	}
	if s.bitBase >= 0 {
		for c := s.bitBase; c < min(s.bitBase+64, len(s.ids)); c++ {
			s.bit[s.ids[c]] = 0
		}
	}
	s.bitBase, s.alive = base, 0
	lo, hi := uint32(maxEndpointID), uint32(0)
	for c := base; c < end; c++ {
		if id := s.ids[c]; id != 0 {
			lo, hi = min(lo, id), max(hi, id)
		}
	}
	s.rel, s.relBase = base == 0 && hi >= lo && hi-lo < 64, lo
	for c := base; c < end; c++ {
		id := s.ids[c]
		switch {
		case id == 0:
			s.pos[c-base] = -1
		case s.rel:
			s.pos[c-base] = int8(id - lo)
		default:
			s.pos[c-base] = int8(c - base)
		}
		if id != 0 && int(s.first[c]) == c {
			s.bit[id] = 1 << uint(s.pos[c-base])
			s.alive |= 1 << uint(s.pos[c-base])
		} else if id != 0 {
			s.pos[c-base] = s.pos[int(s.first[c])-base]
		}
	}
}

// resolve maps the candidate names to endpoint IDs, reusing the previous
// resolution when the candidates are the same strings and no endpoint was
// registered or cleared since.
func (s *matchScratch) resolve(ix *Index, cands []string) {
	gen := ix.gen.Load()
	n := len(cands)
	if s.ix == ix && s.gen == gen && sameStrings(cands, s.cands) {
		return
	}
	for _, id := range s.ids {
		s.slot[id] = 0
		s.bit[id] = 0
	}
	s.ix, s.gen = ix, gen
	s.cands = append(s.cands[:0], cands...)
	if cap(s.ids) < n {
		s.ids = make([]uint32, n)
		s.first = make([]int32, n)
	}
	s.ids, s.first = s.ids[:n], s.first[:n]
	if need := int(ix.maxID.Load()) + 1; len(s.slot) < need {
		s.grow(need + need/4)
	}
	for i, name := range cands {
		s.ids[i], s.first[i] = 0, int32(i)
		ep, ok := ix.eps.Load(name)
		if !ok {
			continue
		}
		id := ep.id
		if int(id) >= len(s.slot) { // registered after maxID was read
			s.grow(int(id) + 1 + int(id)/4)
		}
		s.ids[i] = id
		if f := s.slot[id]; f != 0 {
			s.first[i] = f - 1 // the same endpoint listed twice
			continue
		}
		s.slot[id] = int32(i) + 1
	}
	s.bitBase = -1 // setChunk rebuilds the bit table
	s.resolveEngineBlocks(ix, cands)
	s.resolveHybrid(ix, cands)
}

// grow enlarges the per-ID tables to n entries, keeping their contents.
// bit has one more entry, never set: stdPresence's sentinel.
func (s *matchScratch) grow(n int) {
	slot, bit := make([]int32, n), make([]uint64, n+1)
	copy(slot, s.slot)
	copy(bit, s.bit)
	s.slot, s.bit = slot, bit
}
