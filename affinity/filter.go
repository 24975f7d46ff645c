package affinity

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
	"github.com/prometheus/client_golang/prometheus"
)

// Outcome is the reason a Filter decision took the shape it did. Its String
// form is the outcome label of
// llm_d_epp_prefix_cache_affinity_filter_decisions_total.
type Outcome uint8

const (
	// OutcomeNotApplicable: at most one candidate, no full block in the
	// request (nothing to match), or the filter is disabled; all pass.
	OutcomeNotApplicable Outcome = iota
	// OutcomeExploration: the exploration draw hit; all pass.
	OutcomeExploration
	// OutcomeNoMatch: no candidate is sticky; all pass.
	OutcomeNoMatch
	// OutcomeSticky: only the sticky candidates pass.
	OutcomeSticky
	// OutcomeLoadOverride: the TTFT gate fired on committed load; all pass.
	OutcomeLoadOverride
	// OutcomeRequestLoadOverride: the TTFT gate fired on estimates that
	// include this request's uncached tokens (Config.IncludeRequestTokens);
	// all pass.
	OutcomeRequestLoadOverride
	// OutcomeMissingSignal: the gate had to run but one side had no endpoint
	// with a known load signal; the result follows Config.MissingSignalPolicy
	// (sticky ones only, or all).
	OutcomeMissingSignal
	// OutcomeCrowded: the sticky candidates were crowded with open requests
	// (Config.CrowdingRatio); only the non-sticky candidates of least
	// crowding cost pass.
	OutcomeCrowded

	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	"not_applicable", "exploration", "no_match", "sticky", "load_override", "request_load_override", "missing_signal",
	"crowded",
}

// String returns the metric label of o.
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// Candidate is what the filter needs to know about one candidate endpoint for
// the current request. The caller keeps a reusable slice of them.
type Candidate struct {
	// Score is the tier-weighted contiguous matched score for this request on
	// this endpoint (kvindex EndpointMatch.Score), as a float: not truncated.
	// NaN, infinite or negative scores count as no match.
	Score float64
	// InFlightTokens is the endpoint's committed in-flight load: uncached
	// prompt tokens of earlier requests that have not streamed a first chunk
	// (tokenload Tracker.Load). Negative values count as 0.
	InFlightTokens int64
	// LoadKnown says whether InFlightTokens is a real measurement. Endpoints
	// without a known load are left out of the gate's minimum; see
	// MissingSignalPolicy for a side with none.
	LoadKnown bool
	// RequestTokens is this request's projected uncached tokens on the
	// endpoint (tokenload UncachedTokens). Used only with
	// Config.IncludeRequestTokens and by the crowding rule
	// (Config.CrowdingRatio). Negative values count as 0.
	RequestTokens int64
	// OpenRequests is the number of requests open on the endpoint:
	// dispatched and not finished, so also those streaming their answers,
	// whose growing KV use evicts the endpoint's cached prefixes. Used by the
	// crowding rule (Config.CrowdingRatio) when LoadKnown. Negative values
	// count as 0.
	OpenRequests int64
}

// crowdingCost is a candidate's cost in the crowding rule: (uncached tokens
// of this request + 1) × (open requests + 1). The uncached tokens are
// c.RequestTokens, or projected from c.Score through unc when given
// (ApplyProjected). The +1s are added as floats: in int64 they overflow
// at math.MaxInt64, giving the most crowded endpoint a negative cost.
func crowdingCost(c *Candidate, unc *tokenload.Uncached) float64 {
	return (float64(uncachedOf(c, unc)) + 1) * (float64(max(c.OpenRequests, 0)) + 1)
}

// uncachedOf is a candidate's uncached tokens for this request: its
// RequestTokens, or projected from its Score through unc when given.
func uncachedOf(c *Candidate, unc *tokenload.Uncached) int64 {
	if unc != nil {
		return projectUncached(unc, c.Score)
	}
	return max(c.RequestTokens, 0)
}

// projectUncached is the uncached tokens unc projects for a matched score,
// a NaN, infinite or negative score counting as no match (Candidate.Score):
// unc.Of clamps +Inf to a full match, no uncached tokens at all.
func projectUncached(unc *tokenload.Uncached, score float64) int64 {
	if math.IsInf(score, 0) || math.IsNaN(score) {
		score = 0
	}
	return max(unc.Of(score), 0)
}

// moveLimit is the most uncached tokens a crowded request may have on its
// destination: the warmest sticky candidate's plus the extra prefill the
// rule may add (Config.CrowdingMaxExtraPrefill), or +Inf when unbounded or
// when the crowding is severe (Config.CrowdingUnboundRatio: lift).
func (f *Filter) moveLimit(need float64, cands []Candidate, unc *tokenload.Uncached, lift bool) float64 {
	if f.extraTokens <= 0 || lift {
		return math.Inf(1)
	}
	least := math.Inf(1)
	for i := range cands {
		if c := &cands[i]; c.LoadKnown && sticky(c.Score, need) {
			least = min(least, float64(uncachedOf(c, unc)))
		}
	}
	return least + f.extraTokens
}

// severe reports whether the crowding is severe enough to lift the bound on
// the extra prefill (Config.CrowdingUnboundRatio): the sticky side's fewest
// open requests + 1 reach the ratio times the non-sticky side's fewest + 1.
// Either side without a known load (math.MaxInt64) is never severe.
func (f *Filter) severe(openSticky, openCold int64) bool {
	if f.unbound <= 0 || openSticky == math.MaxInt64 || openCold == math.MaxInt64 {
		return false
	}
	return float64(openSticky)+1 >= f.unbound*(float64(openCold)+1)
}

// stickyTolerance is the relative slack of the sticky comparison, so that a
// float sum of tier weights that is nominally at the threshold (ten CPU-tier
// blocks sum to 7.999999999999999, not 8) still counts as reaching it.
const stickyTolerance = 1e-9

// Filter is the prefix-cache affinity filter. It is immutable after New and
// safe for concurrent use.
type Filter struct {
	cfg           Config  // with defaults: its pointers are set
	threshold     float64 // *cfg.AffinityThreshold
	penaltyTokens float64 // MaxTTFTPenalty × PeakPrefillThroughput; gate off when 0
	crowding      float64 // *cfg.CrowdingRatio; the crowding rule is off when 0
	extraTokens   float64 // CrowdingMaxExtraPrefill × PeakPrefillThroughput; no bound when 0
	unbound       float64 // *cfg.CrowdingUnboundRatio; the bound always holds when 0
	random        func() float64
	decisions     [numOutcomes]prometheus.Counter

	// counter is the registered decision counter this Filter uses with
	// other Filters on its registry (nil when it registered none);
	// Close releases it once, the last user's Close unregistering it.
	counter   *prometheus.CounterVec
	closeOnce sync.Once
}

// Close ends this Filter's use of the decision counter; the last of the
// Filters sharing a registry's counter to close unregisters it, whichever
// registered it, so a Filter can be built again on the same registry. The
// Filter keeps working; once the counter is unregistered its decisions are
// just not exported. Close is idempotent.
func (f *Filter) Close() {
	f.closeOnce.Do(func() {
		if f.counter != nil {
			releaseDecisionCounter(f.counter)
		}
	})
}

// Options are a Filter's injected dependencies; the zero value is valid.
type Options struct {
	// Set is the observability bundle (registerer, logger, tracer
	// provider, clock; see package telemetry):
	//   Registerer receives the decision counter
	//   llm_d_epp_prefix_cache_affinity_filter_decisions_total{outcome};
	//   filters sharing a registry share the counter. Nil registers nothing.
	//   Logger only receives the configuration at construction; nil discards.
	telemetry.Set
	// Random is the source of the exploration draw: it must return a uniform
	// value in [0, 1) and be safe for concurrent use. Nil means math/rand/v2's
	// Float64; tests inject a deterministic source.
	Random func() float64
}

// New validates cfg and builds a Filter with its injected dependencies.
func New(cfg Config, opts Options) (*Filter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	logger := opts.Log()
	f := &Filter{cfg: cfg, threshold: *cfg.AffinityThreshold, crowding: *cfg.CrowdingRatio, unbound: *cfg.CrowdingUnboundRatio, random: rand.Float64}
	if opts.Random != nil {
		f.random = opts.Random
	}
	f.extraTokens = cfg.CrowdingMaxExtraPrefill.Seconds() * cfg.PeakPrefillThroughput
	if *cfg.MaxTTFTPenalty > 0 {
		f.penaltyTokens = cfg.MaxTTFTPenalty.Seconds() * cfg.PeakPrefillThroughput
	}
	vec, shared, err := decisionCounter(opts.Set)
	if err != nil {
		return nil, err
	}
	if shared {
		f.counter = vec
	}
	for o := range numOutcomes {
		f.decisions[o] = vec.WithLabelValues(o.String())
	}
	logger.Debug("affinity filter configured",
		"affinityThreshold", f.threshold,
		"explorationProbability", cfg.ExplorationProbability,
		"maxTTFTPenalty", *cfg.MaxTTFTPenalty,
		"peakPrefillThroughput", cfg.PeakPrefillThroughput,
		"gateTokens", f.penaltyTokens,
		"missingSignalPolicy", cfg.MissingSignalPolicy,
		"includeRequestTokens", cfg.IncludeRequestTokens,
		"crowdingRatio", f.crowding,
		"crowdingMaxExtraPrefill", *cfg.CrowdingMaxExtraPrefill,
		"crowdingUnboundRatio", f.unbound)
	return f, nil
}

// Config returns the configuration the Filter runs with: the one given to
// New with its defaults filled in (Config.WithDefaults).
func (f *Filter) Config() Config { return f.cfg }

// GateTokens returns the in-flight token difference above which the TTFT gate
// fires: MaxTTFTPenalty × PeakPrefillThroughput (286,704 with the defaults),
// or 0 when the gate is disabled.
func (f *Filter) GateTokens() float64 { return f.penaltyTokens }

// Apply decides which candidates pass for one request whose prompt has
// totalBlocks full blocks. It appends the indices (into cands, ascending) of
// the passing candidates to dst[:0] and returns the extended slice and the
// outcome, which is also counted. It never returns an empty set for a
// non-empty cands, allocates nothing when dst has capacity len(cands), and
// never panics.
func (f *Filter) Apply(dst []int, totalBlocks int, cands []Candidate) ([]int, Outcome) {
	return f.apply(dst, totalBlocks, cands, nil)
}

// ApplyProjected is Apply for candidates whose RequestTokens need not be
// set unless Config.IncludeRequestTokens: the crowding rule, their only
// other reader, projects each candidate's from its Score (the tier-weighted
// match) through unc, the request's tokenload.Uncached, and only when its
// other conditions hold. A caller with many candidates thus computes no
// uncached tokens for most requests.
func (f *Filter) ApplyProjected(dst []int, totalBlocks int, cands []Candidate, unc *tokenload.Uncached) ([]int, Outcome) {
	return f.apply(dst, totalBlocks, cands, unc)
}

func (f *Filter) apply(dst []int, totalBlocks int, cands []Candidate, unc *tokenload.Uncached) ([]int, Outcome) {
	o, stickies, limit := f.decide(dst[:0], totalBlocks, cands, unc)
	f.decisions[o].Inc()
	if o == OutcomeSticky || (o == OutcomeMissingSignal && f.cfg.MissingSignalPolicy == KeepSticky) {
		return stickies, o // listed by decide's one pass over the candidates
	}
	dst = stickies[:0]
	if o == OutcomeCrowded {
		return f.leastCrowded(dst, totalBlocks, cands, unc, limit), o
	}
	for i := range cands {
		dst = append(dst, i)
	}
	return dst, o
}

// need is the score from which an endpoint is sticky.
func (f *Filter) need(totalBlocks int) float64 {
	return f.threshold * float64(totalBlocks) * (1 - stickyTolerance)
}

func sticky(score, need float64) bool {
	return score >= need && !math.IsInf(score, 1)
}

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

// crowded reports whether the cheapest non-sticky candidate with a known
// load, within the move limit (moveLimit, which it returns for
// leastCrowded), costs less than the crowding ratio times the cheapest
// sticky one. stickies are the sticky candidates' indices and sd what
// decide's pass gathered. With a projection (unc), the
// cold side is first bounded without reading it: no non-sticky candidate
// has a better match than maxCold nor fewer open requests than openCold, and
// the projected uncached tokens never grow with the match, so none costs
// less than that pair would; when even that is not cheap enough, the answer
// is no. A +Inf maxCold (a score of no match) skips the bound.
func (f *Filter) crowded(need float64, cands []Candidate, stickies []int, unc *tokenload.Uncached, sd sides) (limit float64, ok bool) {
	const none = math.MaxFloat64
	openCold, maxCold := sd.openCold, sd.maxCold
	crowdSticky := none
	for _, i := range stickies {
		if c := &cands[i]; c.LoadKnown {
			crowdSticky = min(crowdSticky, crowdingCost(c, unc))
		}
	}
	bound := f.crowding * crowdSticky
	// A +Inf maxCold is a candidate of no match (Candidate.Score) and bounds
	// nothing: the others' matches are then not known to be below any.
	if unc != nil && !math.IsInf(maxCold, 1) && (float64(projectUncached(unc, maxCold))+1)*(float64(openCold)+1) >= bound {
		return 0, false
	}
	limit = f.moveLimit(need, cands, unc, f.severe(sd.openSticky, openCold))
	for i := range cands {
		if c := &cands[i]; c.LoadKnown && !sticky(c.Score, need) && crowdingCost(c, unc) < bound && float64(uncachedOf(c, unc)) <= limit {
			return limit, true
		}
	}
	return 0, false
}

// leastCrowded appends to dst the indices of the non-sticky candidates with
// a known load, within crowded's move limit, whose crowding cost is the
// least (ties all pass, for the scorers to separate).
func (f *Filter) leastCrowded(dst []int, totalBlocks int, cands []Candidate, unc *tokenload.Uncached, limit float64) []int {
	need := f.need(totalBlocks)
	least := math.MaxFloat64
	for i := range cands {
		if c := &cands[i]; c.LoadKnown && !sticky(c.Score, need) && float64(uncachedOf(c, unc)) <= limit {
			least = min(least, crowdingCost(c, unc))
		}
	}
	for i := range cands {
		if c := &cands[i]; c.LoadKnown && !sticky(c.Score, need) && float64(uncachedOf(c, unc)) <= limit && crowdingCost(c, unc) == least {
			dst = append(dst, i)
		}
	}
	return dst
}
