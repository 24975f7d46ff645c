package disagg

import (
	"math"
	"time"

	"github.com/kvroute/kvroute"
)

// decodePick returns the decode candidate of ds with the best decode score
// among those the router's filters keep: the cached share of the prompt
// (DecodeCacheWeight) plus the free share of its decode capacity
// (DecodeLoadWeight × (1 − its load share), the load share being the
// larger of its in-flight output tokens over DecodeQueueOutputTokens and
// its open requests over DecodeQueueRequests, each capped at 1), plus
// Options.DecodeScorers, each clamped to [0, 1] and weighted. A decode
// endpoint's load is what it generates, not the prompt tokens it would
// prefill: when the request is split it prefills none of them. Ties go to
// the earlier candidate; -1 when the filters kept none.
func (p *Profile) decodePick(ds *kvroute.Selection, st stager) int {
	kept, _ := ds.Filter()
	prompts, _ := st.Prompts(ds)
	total := promptTokens(prompts)
	best, bestScore := -1, 0.0
	for _, i := range kept {
		c := ds.Candidate(i)
		s := p.decodeScore(c, p.outputLoad(c.Endpoint.ID), total)
		for _, ws := range p.scorers {
			s += ws.Weight * clamp01(ws.Scorer.Score(ds, i))
		}
		if best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// clamp01 bounds a scorer's value to [0, 1], NaN counting as 0, as the
// router's score stage does.
func clamp01(v float64) float64 {
	switch {
	case v > 1:
		return 1
	case v >= 0:
		return v
	}
	return 0 // negative or NaN
}

// decodeScore is candidate c's decode score for a prompt of total tokens
// with out output tokens in flight on it.
func (p *Profile) decodeScore(c kvroute.Candidate, out, total int64) float64 {
	var cached float64
	if total > 0 {
		cached = 1 - float64(min(max(c.UncachedTokens, 0), total))/float64(total)
	}
	return p.cfg.DecodeCacheWeight*cached + p.cfg.DecodeLoadWeight*(1-p.loadShare(c.OpenRequests, out))
}

// loadShare is a decode endpoint's used share of its decode capacity: the
// larger of its open requests' and its output tokens' share, each capped
// at 1.
func (p *Profile) loadShare(open, out int64) float64 {
	share := func(n, q int64) float64 { return float64(min(max(n, 0), q)) / float64(q) }
	return max(share(open, p.cfg.DecodeQueueRequests), share(out, p.cfg.DecodeQueueOutputTokens))
}

// decide is the decider's threshold: reasonUncached (split) when the
// decode endpoint would compute at least NonCachedTokens of a prompt of
// total tokens (every prompt with a negative threshold), otherwise the
// reason to prefill locally.
func (p *Profile) decide(uncached, total int64) int {
	switch {
	case total == 0:
		return reasonNoTokens
	case p.cfg.NonCachedTokens < 0:
		return reasonUncached
	case uncached >= p.cfg.NonCachedTokens:
		return reasonUncached
	}
	return reasonCached
}

// Estimate is the cost rule's view of one request: what each of its two
// endpoints has queued and would compute, as the router's load accounting
// and index know them.
type Estimate struct {
	// DecodeQueued is the decode endpoint's in-flight prompt tokens (its
	// local requests not yet at their first token); DecodeUncached the
	// request's prompt tokens it does not hold (it prefills them when
	// local, pulls them when split); DecodeOpen its open requests, the
	// running requests a local prefill stalls.
	DecodeQueued, DecodeUncached, DecodeOpen int64
	// PrefillQueued is the prefill endpoint's in-flight prompt tokens;
	// PrefillUncached the request's prompt tokens it would compute.
	PrefillQueued, PrefillUncached int64
}

// SplitTTFT is the estimated time to first token of splitting: the prefill
// endpoint computes its queue and the request's uncached tokens at
// PrefillTokensPerSecond, then the decode endpoint pulls the tokens it
// lacks (TransferLatency plus DecodeUncached at TransferTokensPerSecond).
func (c Config) SplitTTFT(e Estimate) time.Duration {
	c = c.WithDefaults()
	d := seconds((float64(max(e.PrefillQueued, 0))+float64(max(e.PrefillUncached, 0)))/c.PrefillTokensPerSecond +
		float64(max(e.DecodeUncached, 0))/c.TransferTokensPerSecond)
	lat := max(c.TransferLatency, 0)
	if d > math.MaxInt64-lat {
		return math.MaxInt64 // saturated: the latency must not wrap it
	}
	return d + lat
}

// LocalTTFT is the estimated time to first token of prefilling on the
// decode endpoint: its queue and the request's uncached tokens at
// PrefillTokensPerSecond, plus the stall priced by DecodeStallWeight: each
// of its DecodeOpen running requests waits the prefill's own time for its
// next token, counted at most DecodeStallCap times.
func (c Config) LocalTTFT(e Estimate) time.Duration {
	c = c.WithDefaults()
	own := float64(max(e.DecodeUncached, 0)) / c.PrefillTokensPerSecond
	stall := max(c.DecodeStallWeight, 0) * float64(max(e.DecodeOpen, 0))
	if c.DecodeStallCap >= 0 {
		stall = min(stall, c.DecodeStallCap)
	}
	return seconds(float64(max(e.DecodeQueued, 0))/c.PrefillTokensPerSecond + own + stall*own)
}

// SplitCheaper is the cost rule: splitting is estimated faster than
// prefilling locally (a tie stays local: no transfer for nothing).
func (c Config) SplitCheaper(e Estimate) bool { return c.SplitTTFT(e) < c.LocalTTFT(e) }

// SplitCheaperBelowThreshold is the cost rule for a request below
// NonCachedTokens: SplitCheaper with the stall priced at
// BelowThresholdStallWeight; false when that is negative (the extension
// is off).
func (c Config) SplitCheaperBelowThreshold(e Estimate) bool {
	c = c.WithDefaults()
	if c.BelowThresholdStallWeight < 0 {
		return false
	}
	c.DecodeStallWeight = c.BelowThresholdStallWeight
	return c.SplitCheaper(e)
}

// seconds converts an estimate in seconds to a Duration, saturating at the
// largest and smallest Duration: a huge estimate (a queue of billions of
// tokens, or a throughput configured near zero) compares as huge instead of
// wrapping to a negative Duration that flips the cost rule. NaN, which only
// an infinite term times a zero one yields, saturates at the largest too.
func seconds(s float64) time.Duration {
	ns := s * float64(time.Second)
	switch {
	case ns >= math.MaxInt64 || math.IsNaN(ns): // float64(MaxInt64) is 2^63, itself out of range
		return math.MaxInt64
	case ns <= math.MinInt64:
		return math.MinInt64
	}
	return time.Duration(ns)
}
