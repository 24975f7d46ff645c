package affinity

import (
	"math"
	"slices"

	"github.com/kvroute/kvroute/tokenload"
)

// decide implements the algorithm of the package documentation and returns
// the outcome and, appended to dst in the same pass, the sticky candidates'
// indices (none when it returns before reading the candidates); Apply
// derives the passing set from them. With OutcomeCrowded it also returns
// the crowding rule's move limit (moveLimit), which Apply's leastCrowded
// applies; 0 otherwise.
func (f *Filter) decide(dst []int, totalBlocks int, cands []Candidate, unc *tokenload.Uncached) (Outcome, []int, float64) {
	if len(cands) <= 1 || totalBlocks <= 0 || f.threshold <= 0 {
		return OutcomeNotApplicable, dst, 0
	}
	if p := f.cfg.ExplorationProbability; p > 0 && f.random() < p {
		return OutcomeExploration, dst, 0
	}
	need := f.need(totalBlocks)
	// One pass finds the sticky candidates and, per side, the least load
	// and the fewest open requests; the crowding rule's costs are computed
	// in a second pass, only when its other conditions hold. The pass is
	// written twice, for committed load alone (integers) and with the
	// request's tokens (floats), so that Pick's common case pays no branch
	// per candidate on the mode; each is a function of its own, small
	// enough for its state to stay in registers.
	start := len(dst)
	withRequest, crowding := f.cfg.IncludeRequestTokens, f.crowding > 0
	var sd sides
	if !withRequest {
		var out []int
		dst, out = growFor(dst, len(cands))
		n, sticky0, cold0, openSticky, openCold, maxCold, known := passCommitted(out, cands, need)
		dst = dst[:len(dst)+n]
		sd = sides{
			stickyLoad: float64(sticky0), coldLoad: float64(cold0),
			openSticky: openSticky, openCold: openCold, maxCold: maxCold,
			stickyKnown: known&2 != 0, coldKnown: known&1 != 0,
		}
	} else {
		dst, sd = passWithRequest(dst, cands, need)
	}
	nSticky := len(dst) - start
	nCold := len(cands) - nSticky
	switch {
	case nSticky == 0:
		return OutcomeNoMatch, dst, 0
	case nCold == 0:
		return OutcomeSticky, dst, 0
	case !sd.stickyKnown || !sd.coldKnown:
		// The missing signal is the gate's to handle; without the gate
		// only the crowding rule is left, and it compares known loads.
		if f.penaltyTokens <= 0 {
			return OutcomeSticky, dst, 0
		}
		return OutcomeMissingSignal, dst, 0
	case f.penaltyTokens > 0 && sd.stickyLoad-sd.coldLoad > f.penaltyTokens:
		if withRequest {
			return OutcomeRequestLoadOverride, dst, 0
		}
		return OutcomeLoadOverride, dst, 0
	case crowding && sd.openSticky > sd.openCold:
		if limit, ok := f.crowded(need, cands, dst[start:], unc, sd); ok {
			return OutcomeCrowded, dst, limit
		}
	}
	return OutcomeSticky, dst, 0
}

// sides is what decide's pass over the candidates gathers: per side of the
// sticky line, the least load and the fewest open requests among the
// candidates with a known load (math.MaxFloat64 and math.MaxInt64 when
// none), whether there is one, and the best match among the known-load
// non-sticky candidates (-Inf when none).
type sides struct {
	stickyLoad, coldLoad   float64
	openSticky, openCold   int64
	maxCold                float64
	stickyKnown, coldKnown bool
}

// growFor returns dst with room for n more elements and, as out, the n
// elements past its end to be written by index: decide's passes list the
// sticky candidates without an append (whose call would keep their state
// on the stack).
func growFor(dst []int, n int) (grown, out []int) {
	dst = slices.Grow(dst, n)
	return dst, dst[len(dst) : len(dst)+n]
}

// passCommitted is decide's pass on committed load alone: it writes the
// sticky candidates' indices to out[:n] (out at least len(cands) long) and
// returns, per side of the sticky line, the least load and the fewest open
// requests among the candidates with a known load (math.MaxInt64 when none:
// the least of each side is found among the integers and converted once by
// the caller, the conversion keeping their order; the fewest open requests
// are a min of integers, cheaper than a branch on whether the crowding rule
// is on), the best match among the known-load non-sticky candidates (-Inf
// when none), and known: bit 0 when a non-sticky candidate has a known
// load, bit 1 when a sticky one has. Its results are separate values, not
// a sides: a struct of more than four fields lives in memory, and the
// loop's state would with it.
func passCommitted(out []int, cands []Candidate, need float64) (n int, sticky0, cold0, openSticky, openCold int64, maxCold float64, known int) {
	sticky0, cold0 = math.MaxInt64, math.MaxInt64
	openSticky, openCold = math.MaxInt64, math.MaxInt64
	maxCold = math.Inf(-1)
	out = out[:len(cands)]
	for i := range cands {
		c := &cands[i]
		if !sticky(c.Score, need) {
			if c.LoadKnown {
				known |= 1
				cold0, openCold = min(cold0, max(c.InFlightTokens, 0)), min(openCold, max(c.OpenRequests, 0))
				if c.Score > maxCold {
					maxCold = c.Score
				}
			}
			continue
		}
		out[n] = i // n <= i
		n++
		if c.LoadKnown {
			known |= 2
			sticky0, openSticky = min(sticky0, max(c.InFlightTokens, 0)), min(openSticky, max(c.OpenRequests, 0))
		}
	}
	return n, sticky0, cold0, openSticky, openCold, maxCold, known
}

// passWithRequest is decide's pass on committed load plus the request's
// tokens, summed as floats as the gate compares them: two int64 terms may
// overflow; a whole number, never NaN, so < is min. It appends the sticky
// candidates' indices to dst.
func passWithRequest(dst []int, cands []Candidate, need float64) ([]int, sides) {
	const none = math.MaxFloat64
	dst, out := growFor(dst, len(cands))
	n := 0
	sd := sides{stickyLoad: none, coldLoad: none, openSticky: math.MaxInt64, openCold: math.MaxInt64, maxCold: math.Inf(-1)}
	for i := range cands {
		c := &cands[i]
		isSticky := sticky(c.Score, need)
		if isSticky {
			out[n] = i
			n++
		}
		if !c.LoadKnown {
			continue
		}
		load := float64(max(c.InFlightTokens, 0)) + float64(max(c.RequestTokens, 0))
		open := max(c.OpenRequests, 0)
		if isSticky {
			sd.stickyKnown, sd.stickyLoad, sd.openSticky = true, min(sd.stickyLoad, load), min(sd.openSticky, open)
		} else {
			sd.coldKnown, sd.coldLoad, sd.openCold = true, min(sd.coldLoad, load), min(sd.openCold, open)
			if c.Score > sd.maxCold {
				sd.maxCold = c.Score
			}
		}
	}
	return dst[:len(dst)+n], sd
}
