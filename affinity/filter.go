package affinity

import (
	"math"
	"math/rand/v2"
	"sync"

	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
	"github.com/prometheus/client_golang/prometheus"
)

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
