package tokenload

// DefaultQueueThresholdTokens is the token load at which an endpoint's score
// reaches 0: 128 requests × 32K tokens.
const DefaultQueueThresholdTokens int64 = 4_194_304

// Score is the token-load scorer: 1 − min(tokens, q)/q in [0, 1], where
// tokens = committedTokens (the endpoint's in-flight load, Tracker.Load) +
// requestTokens (this request's projected uncached tokens on the endpoint,
// UncachedTokens). It is 1 when tokens <= 0; negative inputs count as 0; q <= 0
// means DefaultQueueThresholdTokens. The score is absolute, not normalized
// across candidates, so every endpoint at or above q scores 0.
func Score(committedTokens, requestTokens, q int64) float64 {
	if q <= 0 {
		q = DefaultQueueThresholdTokens
	}
	committedTokens, requestTokens = max(committedTokens, 0), max(requestTokens, 0)
	if committedTokens >= q || requestTokens >= q-committedTokens {
		return 0 // also avoids overflowing the sum
	}
	tokens := committedTokens + requestTokens
	if tokens == 0 {
		return 1
	}
	return 1 - float64(tokens)/float64(q)
}

// UncachedTokens returns a request's projected uncached prompt tokens on one
// endpoint, the tokens that endpoint will have to prefill (the unmatched
// full blocks plus the tail beyond the indexed blocks):
//
//	(totalBlocks − matchedBlocks) × blockSize + max(0, inputTokens − totalBlocks × blockSize)
//
// rounded to the nearest token and clamped to [0, inputTokens]. inputTokens is
// the prompt length (0 when tokenization failed: the request then adds no
// token load); totalBlocks is the number of full blocks the prompt was keyed
// into; the second term is the tail the index does not cover (the trailing
// partial block, and anything beyond a key cap).
//
// matchedBlocks is what the caller considers cached on the endpoint. Passing
// the tier-weighted score (kvindex EndpointMatch.Score, as the llm-d router
// does, and the recommended choice for a kvroute router) counts about 20 % of each CPU-tier block as
// uncached, reflecting that loading it back is not free and keeping the load
// consistent with the affinity filter's view; passing the unweighted
// contiguous block count (EndpointMatch.Blocks) counts CPU-tier blocks as
// fully cached. With no match information pass 0: the result is then the full
// inputTokens. A blockSize <= 0 also gives the full inputTokens. NaN or
// negative matchedBlocks count as 0, values above totalBlocks as totalBlocks.
func UncachedTokens(inputTokens, totalBlocks int, matchedBlocks float64, blockSize int) int64 {
	return NewUncached(inputTokens, totalBlocks, blockSize).Of(matchedBlocks)
}

// UncachedTokensAll writes UncachedTokens(inputTokens, totalBlocks,
// matched[i], blockSize) into dst[i] (dst at least len(matched) long) for
// every i: one request's projected uncached tokens on each of its
// candidates, the request's own terms computed once.
func UncachedTokensAll(dst []int64, inputTokens, totalBlocks int, matched []float64, blockSize int) {
	u := NewUncached(inputTokens, totalBlocks, blockSize)
	dst = dst[:len(matched)]
	for i, m := range matched {
		dst[i] = u.Of(m)
	}
}

// Uncached holds one request's terms of UncachedTokens, computed once
// (NewUncached) for a caller that projects them on each candidate in a
// pass of its own.
type Uncached struct {
	input, tail int64   // the prompt's tokens; those beyond its indexed blocks
	total, bs   float64 // its full blocks and the block size; 0 when it has none
}

// NewUncached returns the terms of UncachedTokens(inputTokens, totalBlocks,
// ·, blockSize).
func NewUncached(inputTokens, totalBlocks, blockSize int) Uncached {
	input := int64(max(inputTokens, 0))
	if blockSize <= 0 || totalBlocks <= 0 {
		return Uncached{input: input, tail: input} // Of gives input
	}
	var tail int64 // the tokens beyond totalBlocks × blockSize, which may exceed the int64 range
	if int64(totalBlocks) <= input/int64(blockSize) {
		tail = input - int64(totalBlocks)*int64(blockSize)
	}
	return Uncached{
		input: input,
		tail:  tail,
		total: float64(totalBlocks),
		bs:    float64(blockSize),
	}
}

// Of returns UncachedTokens(inputTokens, totalBlocks, matchedBlocks,
// blockSize) for u's terms. The unmatched blocks' tokens may exceed the
// int64 range (up to about 2¹²⁶): at or above 2⁶³ they are more than the
// input, and the sum with the tail is clamped before it could wrap.
func (u Uncached) Of(matchedBlocks float64) int64 {
	m := matchedBlocks
	if !(m >= 0) { // NaN or negative
		m = 0
	}
	x := (u.total - min(m, u.total)) * u.bs
	if x >= 1<<63 {
		return u.input
	}
	return min(roundTokens(x), u.input-u.tail) + u.tail
}

// roundTokens is math.Round for the non-negative token counts of
// UncachedTokens (below 2⁶³), without its call: the truncation plus one
// when the fraction, exact below 2⁵³ and zero above, is at least a half
// (halves round away from zero, as math.Round's do). The counts are whole
// numbers unless a CPU-tier block weighed in.
func roundTokens(x float64) int64 {
	n := int64(x)
	if x-float64(n) >= 0.5 {
		n++
	}
	return n
}
