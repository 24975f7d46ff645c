package affinity

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

func newFilter(t testing.TB, cfg Config, opts ...Options) *Filter {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	f, err := New(cfg, o)
	require.NoError(t, err)
	return f
}

// warm and cold build candidates for a 10-block request with a known load.
func warm(load int64) Candidate { return Candidate{Score: 10, InFlightTokens: load, LoadKnown: true} }
func cold(load int64) Candidate { return Candidate{Score: 0, InFlightTokens: load, LoadKnown: true} }

func apply(f *Filter, total int, cands ...Candidate) ([]int, Outcome) {
	return f.Apply(make([]int, 0, len(cands)), total, cands)
}

func TestFilterKeepsPrefixGroupOnWarmEndpoints(t *testing.T) {
	f := newFilter(t, DefaultConfig())
	got, o := apply(f, 10,
		Candidate{Score: 9, LoadKnown: true},   // 0.9: sticky
		Candidate{Score: 7.9, LoadKnown: true}, // 0.79: not sticky
		Candidate{Score: 8, LoadKnown: true},   // exactly 0.8: sticky
		cold(0))
	require.Equal(t, OutcomeSticky, o)
	require.Equal(t, []int{0, 2}, got)
}

func TestFilterPassesEveryoneWithoutWarmEndpoint(t *testing.T) {
	f := newFilter(t, DefaultConfig())
	got, o := apply(f, 10, Candidate{Score: 7.99, LoadKnown: true}, cold(0), cold(5))
	require.Equal(t, OutcomeNoMatch, o)
	require.Equal(t, []int{0, 1, 2}, got)
}

func TestFilterNotApplicable(t *testing.T) {
	f := newFilter(t, DefaultConfig())
	got, o := apply(f, 10)
	require.Equal(t, OutcomeNotApplicable, o)
	require.Empty(t, got)

	got, o = apply(f, 10, cold(0))
	require.Equal(t, OutcomeNotApplicable, o, "a single candidate is never filtered")
	require.Equal(t, []int{0}, got)

	got, o = apply(f, 0, warm(0), cold(0))
	require.Equal(t, OutcomeNotApplicable, o, "a prompt shorter than one block has nothing to match")
	require.Equal(t, []int{0, 1}, got)

	cfg := DefaultConfig()
	cfg.AffinityThreshold = new(float64(0))
	got, o = apply(newFilter(t, cfg), 10, warm(0), cold(0))
	require.Equal(t, OutcomeNotApplicable, o, "threshold 0 disables the filter")
	require.Equal(t, []int{0, 1}, got)
}

func TestFilterScoresThatCannotMatch(t *testing.T) {
	f := newFilter(t, DefaultConfig())
	for _, s := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -10} {
		_, o := apply(f, 10, Candidate{Score: s, LoadKnown: true}, cold(0))
		require.Equal(t, OutcomeNoMatch, o, "score %v", s)
	}
}

// A prompt cached entirely in the CPU tier (weight 0.8) sums to 0.8·N as a
// float. The reference truncates that sum to an int and misses the default
// threshold for most N; kvroute compares the float with a rounding tolerance,
// so such a prompt is sticky at every length, and anything really below the
// threshold is not.
func TestFilterCPUTierPromptReachesDefaultThreshold(t *testing.T) {
	f := newFilter(t, DefaultConfig())
	for n := 1; n <= 4096; n++ {
		var sum float64
		for range n {
			sum += 0.8
		}
		_, o := apply(f, n, Candidate{Score: sum, LoadKnown: true}, cold(0))
		require.Equal(t, OutcomeSticky, o, "N=%d sum=%v", n, sum)

		_, o = apply(f, n, Candidate{Score: 0.8*float64(n) - 0.01, LoadKnown: true}, cold(0))
		require.Equal(t, OutcomeNoMatch, o, "N=%d just below", n)
	}
}

func TestFilterGateFiresOnlyAbovePenalty(t *testing.T) {
	f := newFilter(t, DefaultConfig())
	require.Equal(t, 286704.0, f.GateTokens(), "18 s × 15,928 tokens/s")

	got, o := apply(f, 10, warm(286704), cold(0))
	require.Equal(t, OutcomeSticky, o, "exactly the penalty: stay")
	require.Equal(t, []int{0}, got)

	got, o = apply(f, 10, warm(286705), cold(0))
	require.Equal(t, OutcomeLoadOverride, o, "one token above the penalty: widen")
	require.Equal(t, []int{0, 1}, got)

	// The difference matters, not the absolute load.
	_, o = apply(f, 10, warm(1_286_704), cold(1_000_000))
	require.Equal(t, OutcomeSticky, o)
	_, o = apply(f, 10, warm(1_286_705), cold(1_000_000))
	require.Equal(t, OutcomeLoadOverride, o)
}

func TestFilterGateComparesLeastLoadedOfEachSide(t *testing.T) {
	f := newFilter(t, DefaultConfig())
	// The least-loaded warm endpoint can take it: stay sticky on both warm ones.
	got, o := apply(f, 10, warm(5_000_000), warm(100), cold(0), cold(0))
	require.Equal(t, OutcomeSticky, o)
	require.Equal(t, []int{0, 1}, got)

	// Every warm endpoint is saturated relative to the least-loaded cold one.
	got, o = apply(f, 10, warm(400_000), warm(300_000), cold(900_000), cold(0))
	require.Equal(t, OutcomeLoadOverride, o)
	require.Equal(t, []int{0, 1, 2, 3}, got)

	// Everybody busy: no absolute cap, the filter stays sticky.
	_, o = apply(f, 10, warm(3_000_000), cold(2_900_000), cold(2_800_000))
	require.Equal(t, OutcomeSticky, o)
}

func TestFilterGateDisabledOrWithoutColdSide(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxTTFTPenalty = new(time.Duration(0))
	cfg.PeakPrefillThroughput = 0
	f := newFilter(t, cfg)
	require.Zero(t, f.GateTokens())
	got, o := apply(f, 10, warm(1<<40), cold(0))
	require.Equal(t, OutcomeSticky, o, "penalty 0: load never breaks stickiness")
	require.Equal(t, []int{0}, got)
	unknown := cold(0)
	unknown.LoadKnown = false
	got, o = apply(f, 10, warm(1<<40), unknown)
	require.Equal(t, OutcomeSticky, o, "penalty 0: no gate, so no missing signal")
	require.Equal(t, []int{0}, got)

	f = newFilter(t, DefaultConfig())
	got, o = apply(f, 10, warm(1<<40), warm(1<<40))
	require.Equal(t, OutcomeSticky, o, "all sticky: nothing to fall back to")
	require.Equal(t, []int{0, 1}, got)
}

func TestFilterIncludeRequestTokens(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IncludeRequestTokens = true
	f := newFilter(t, cfg)
	// The warm endpoint has the whole prompt cached; the cold one would
	// prefill 8,192 tokens for this request.
	sticky := Candidate{Score: 10, InFlightTokens: 300_000, LoadKnown: true, RequestTokens: 0}
	coldSmall := Candidate{Score: 0, InFlightTokens: 0, LoadKnown: true, RequestTokens: 8_192}
	coldBig := Candidate{Score: 0, InFlightTokens: 0, LoadKnown: true, RequestTokens: 20_000}

	got, o := apply(f, 10, sticky, coldSmall)
	require.Equal(t, OutcomeRequestLoadOverride, o, "300,000 − 8,192 > 286,704")
	require.Equal(t, []int{0, 1}, got)

	got, o = apply(f, 10, sticky, coldBig)
	require.Equal(t, OutcomeSticky, o, "300,000 − 20,000 ≤ 286,704: moving costs more than it saves")
	require.Equal(t, []int{0}, got)

	// Without the opt-in the request's tokens are ignored.
	_, o = apply(newFilter(t, DefaultConfig()), 10, sticky, coldBig)
	require.Equal(t, OutcomeLoadOverride, o)
}

func TestFilterMissingSignal(t *testing.T) {
	unknownWarm := Candidate{Score: 10, InFlightTokens: 0, LoadKnown: false}
	unknownCold := Candidate{Score: 0, InFlightTokens: 0, LoadKnown: false}

	keep := newFilter(t, DefaultConfig())
	cfg := DefaultConfig()
	cfg.MissingSignalPolicy = Widen
	widen := newFilter(t, cfg)

	for _, tc := range []struct {
		name  string
		cands []Candidate
	}{
		{"warm side unknown", []Candidate{unknownWarm, cold(0)}},
		{"cold side unknown", []Candidate{warm(1 << 30), unknownCold}},
		{"both unknown", []Candidate{unknownWarm, unknownCold}},
	} {
		got, o := apply(keep, 10, tc.cands...)
		require.Equal(t, OutcomeMissingSignal, o, tc.name)
		require.Equal(t, []int{0}, got, "keep_sticky: %s", tc.name)

		got, o = apply(widen, 10, tc.cands...)
		require.Equal(t, OutcomeMissingSignal, o, tc.name)
		require.Equal(t, []int{0, 1}, got, "widen: %s", tc.name)
	}

	// A side with at least one known endpoint is compared on its known ones.
	got, o := apply(widen, 10, unknownWarm, warm(0), cold(0), unknownCold)
	require.Equal(t, OutcomeSticky, o)
	require.Equal(t, []int{0, 1}, got)
	_, o = apply(widen, 10, unknownWarm, warm(286705), cold(0))
	require.Equal(t, OutcomeLoadOverride, o)

	// The signal is only needed when the gate runs.
	noGate := DefaultConfig()
	noGate.MaxTTFTPenalty = new(time.Duration(0))
	_, o = apply(newFilter(t, noGate), 10, unknownWarm, unknownCold)
	require.Equal(t, OutcomeSticky, o)
	_, o = apply(keep, 10, unknownWarm, unknownWarm)
	require.Equal(t, OutcomeSticky, o)
}

func TestFilterExploration(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ExplorationProbability = 0.25
	var draw float64
	calls := 0
	f := newFilter(t, cfg, Options{Random: func() float64 { calls++; return draw }})

	draw = 0.1
	got, o := apply(f, 10, warm(0), cold(0), cold(0))
	require.Equal(t, OutcomeExploration, o)
	require.Equal(t, []int{0, 1, 2}, got)

	draw = 0.25
	got, o = apply(f, 10, warm(0), cold(0), cold(0))
	require.Equal(t, OutcomeSticky, o, "draw == p does not explore")
	require.Equal(t, []int{0}, got)
	require.Equal(t, 2, calls)

	_, o = apply(f, 10, warm(0))
	require.Equal(t, OutcomeNotApplicable, o)
	require.Equal(t, 2, calls, "no draw for a single candidate")

	never := newFilter(t, DefaultConfig(), Options{Random: func() float64 {
		t.Fatal("exploration probability 0 must not draw")
		return 0
	}})
	_, o = apply(never, 10, warm(0), cold(0))
	require.Equal(t, OutcomeSticky, o)

	cfg.ExplorationProbability = 1
	always := newFilter(t, cfg, Options{Random: func() float64 { return math.Nextafter(1, 0) }})
	_, o = apply(always, 10, warm(0), cold(0))
	require.Equal(t, OutcomeExploration, o)
}

// With the default random source, exploration happens at about the configured
// rate.
func TestFilterExplorationRate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ExplorationProbability = 0.3
	f := newFilter(t, cfg)
	const n = 20000
	explored := 0
	cands := []Candidate{warm(0), cold(0)}
	dst := make([]int, 0, 2)
	for range n {
		var o Outcome
		dst, o = f.Apply(dst, 10, cands)
		if o == OutcomeExploration {
			explored++
		}
	}
	require.InDelta(t, 0.3, float64(explored)/n, 0.03)
}

// reference is a direct transcription of llm-d's affinity filter algorithm
// and per-endpoint TTFT estimate (throughput source, estimates in
// milliseconds), used as an oracle.
func reference(cfg Config, total int, cands []Candidate) (all bool, stickySet []int) {
	if len(cands) <= 1 || total <= 0 || *cfg.AffinityThreshold <= 0 {
		return true, nil
	}
	var s, n []int
	for i, c := range cands {
		if c.Score/float64(total) >= *cfg.AffinityThreshold {
			s = append(s, i)
		} else {
			n = append(n, i)
		}
	}
	if len(s) == 0 {
		return true, nil
	}
	if *cfg.MaxTTFTPenalty > 0 && len(n) > 0 {
		best := func(set []int) float64 {
			b := math.MaxFloat64
			for _, i := range set {
				b = min(b, float64(cands[i].InFlightTokens)/cfg.PeakPrefillThroughput*1000)
			}
			return b
		}
		if best(s)-best(n) > float64(cfg.MaxTTFTPenalty.Milliseconds()) {
			return true, nil
		}
	}
	return false, s
}

func TestFilterMatchesReferenceOnRandomInputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	f := newFilter(t, DefaultConfig())
	dst := make([]int, 0, 16)
	for range 20000 {
		total := 1 + rng.IntN(64)
		cands := make([]Candidate, 1+rng.IntN(8))
		for i := range cands {
			cands[i] = Candidate{
				Score:          float64(rng.IntN(total + 1)),
				InFlightTokens: rng.Int64N(600_000),
				LoadKnown:      true,
			}
		}
		var o Outcome
		dst, o = f.Apply(dst, total, cands)
		all, s := reference(f.Config(), total, cands)
		if all {
			require.Len(t, dst, len(cands), "outcome %v, cands %+v", o, cands)
		} else {
			require.Equal(t, s, dst, "outcome %v, cands %+v", o, cands)
		}
	}
}

func TestFilterApplyDoesNotAllocate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ExplorationProbability = 0.5
	f, err := New(cfg, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry()}})
	require.NoError(t, err)
	cands := make([]Candidate, 64)
	for i := range cands {
		cands[i] = Candidate{Score: float64(i % 33), InFlightTokens: int64(i) * 1000, LoadKnown: true}
	}
	dst := make([]int, 0, len(cands))
	allocs := testing.AllocsPerRun(1000, func() { dst, _ = f.Apply(dst, 32, cands) })
	require.Zero(t, allocs)
}

func TestFilterDecisionMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	f, err := New(DefaultConfig(), Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	// A second filter (e.g. a strict one) shares the counter.
	strictCfg := DefaultConfig()
	strictCfg.AffinityThreshold = new(float64(0.99))
	strict, err := New(strictCfg, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)

	apply(f, 10, warm(0), cold(0))                                     // sticky
	apply(f, 10, warm(0), cold(0))                                     // sticky
	apply(f, 10, cold(0), cold(0))                                     // no_match
	apply(f, 10, warm(1_000_000), cold(0))                             // load_override
	apply(f, 10, warm(0))                                              // not_applicable
	apply(f, 10, Candidate{Score: 10}, cold(0))                        // missing_signal
	apply(strict, 10, Candidate{Score: 9.5, LoadKnown: true}, cold(0)) // no_match at 0.99

	want := `
# HELP llm_d_epp_prefix_cache_affinity_filter_decisions_total Prefix-cache affinity filter decisions by outcome (sticky, no_match, load_override, request_load_override, exploration, not_applicable, missing_signal, crowded).
# TYPE llm_d_epp_prefix_cache_affinity_filter_decisions_total counter
llm_d_epp_prefix_cache_affinity_filter_decisions_total{outcome="crowded"} 0
llm_d_epp_prefix_cache_affinity_filter_decisions_total{outcome="exploration"} 0
llm_d_epp_prefix_cache_affinity_filter_decisions_total{outcome="load_override"} 1
llm_d_epp_prefix_cache_affinity_filter_decisions_total{outcome="missing_signal"} 1
llm_d_epp_prefix_cache_affinity_filter_decisions_total{outcome="no_match"} 2
llm_d_epp_prefix_cache_affinity_filter_decisions_total{outcome="not_applicable"} 1
llm_d_epp_prefix_cache_affinity_filter_decisions_total{outcome="request_load_override"} 0
llm_d_epp_prefix_cache_affinity_filter_decisions_total{outcome="sticky"} 2
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), DecisionsMetric))
}

func TestFilterWithoutRegistererRegistersNothing(t *testing.T) {
	f := newFilter(t, DefaultConfig())
	_, o := apply(f, 10, warm(0), cold(0))
	require.Equal(t, OutcomeSticky, o)
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AffinityThreshold = new(float64(1.5))
	_, err := New(cfg, Options{})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

func TestNewFillsDefaultPolicy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MissingSignalPolicy = ""
	f := newFilter(t, cfg)
	require.Equal(t, KeepSticky, f.Config().MissingSignalPolicy)
	require.Equal(t, 18*time.Second, *f.Config().MaxTTFTPenalty)
}

func TestOutcomeString(t *testing.T) {
	require.Equal(t, "request_load_override", OutcomeRequestLoadOverride.String())
	require.Equal(t, "unknown", Outcome(200).String())
}

// crowd builds a candidate of a 10-block request with this request's
// uncached tokens and the endpoint's open requests.
func crowd(score float64, uncached, open int64) Candidate {
	return Candidate{Score: score, LoadKnown: true, RequestTokens: uncached, OpenRequests: open}
}

func TestFilterCrowdingMovesOffCrowdedWarmEndpoint(t *testing.T) {
	f := newFilter(t, DefaultConfig()) // the rule is on by default
	// Warm: (128+1) × (20+1) = 2,709; the colder: (589+1) × (2+1) = 1,770
	// and (589+1) × (4+1) = 2,950. 1,770 < 1.5 × 2,709: crowded, and only
	// the cold candidate of least cost passes.
	got, o := apply(f, 10, crowd(10, 128, 20), crowd(6, 589, 2), crowd(6, 589, 4))
	require.Equal(t, OutcomeCrowded, o)
	require.Equal(t, []int{1}, got)

	// Ties on the least cost all pass, for the scorers to separate.
	got, o = apply(f, 10, crowd(10, 128, 20), crowd(6, 589, 2), crowd(6, 589, 2))
	require.Equal(t, OutcomeCrowded, o)
	require.Equal(t, []int{1, 2}, got)
}

func TestFilterCrowdingStaysWhenMovingCostsMore(t *testing.T) {
	f := newFilter(t, DefaultConfig()) // the rule is on by default
	// (3,355+1) × (2+1) = 10,068 is not below 1.5 × (128+1) × (20+1) = 4,063.5.
	got, o := apply(f, 10, crowd(10, 128, 20), crowd(3, 3355, 2))
	require.Equal(t, OutcomeSticky, o)
	require.Equal(t, []int{0}, got)

	// A cold endpoint with as many open requests is not less crowded, however
	// little it costs: nearly as warm, it is not where the crowd is not.
	got, o = apply(f, 10, crowd(10, 100, 5), crowd(7.9, 110, 5))
	require.Equal(t, OutcomeSticky, o)
	require.Equal(t, []int{0}, got)

	// Unknown loads do not count; a ratio of 0 disables the rule.
	unknown := crowd(6, 589, 0)
	unknown.LoadKnown = false
	_, o = apply(f, 10, crowd(10, 128, 20), unknown, crowd(6, 589, 30))
	require.Equal(t, OutcomeSticky, o)
	cfg := DefaultConfig()
	cfg.CrowdingRatio = new(0.0)
	_, o = apply(newFilter(t, cfg), 10, crowd(10, 128, 20), crowd(6, 589, 2))
	require.Equal(t, OutcomeSticky, o)
	require.Equal(t, "crowded", OutcomeCrowded.String())
}

// MaxTTFTPenalty 0 turns the TTFT gate off, not the crowding rule (doc.go
// step 5): a request still leaves a warm endpoint crowded with open
// requests, and stays when a side's load is unknown.
func TestFilterCrowdingRuleRunsWithGateDisabled(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxTTFTPenalty = new(time.Duration(0))
	f := newFilter(t, cfg)
	require.Zero(t, f.GateTokens())
	// As in TestFilterCrowdingMovesOffCrowdedWarmEndpoint: 1,770 < 1.5 × 2,709.
	got, o := apply(f, 10, crowd(10, 128, 20), crowd(6, 589, 2), crowd(6, 589, 4))
	require.Equal(t, OutcomeCrowded, o)
	require.Equal(t, []int{1}, got)
	// Committed load far over any gate does not break stickiness.
	heavy := crowd(10, 128, 20)
	heavy.InFlightTokens = 1 << 40
	_, o = apply(f, 10, heavy, crowd(3, 3355, 2))
	require.Equal(t, OutcomeSticky, o)
	// Without the sticky side's load the rule has nothing to compare.
	unknown := crowd(10, 128, 20)
	unknown.LoadKnown = false
	got, o = apply(f, 10, unknown, crowd(6, 589, 2))
	require.Equal(t, OutcomeSticky, o)
	require.Equal(t, []int{0}, got)
}

// An endpoint with math.MaxInt64 open requests or uncached tokens is the
// most crowded or the most costly, not (through an int64 +1 that wraps) the
// least: the crowding rule moves the request to the cheap cold endpoint.
func TestFilterCrowdingCostOfHugeCountsIsHuge(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CrowdingMaxExtraPrefill = new(time.Duration(0)) // any uncached tokens may be a destination's
	f := newFilter(t, cfg)
	got, o := apply(f, 10, crowd(10, 128, 20), crowd(6, 589, math.MaxInt64), crowd(6, 589, 2), crowd(6, math.MaxInt64, 2))
	require.Equal(t, OutcomeCrowded, o)
	require.Equal(t, []int{2}, got)
	require.Greater(t, crowdingCost(&Candidate{OpenRequests: math.MaxInt64}, nil), 0.0)
	require.Greater(t, crowdingCost(&Candidate{RequestTokens: math.MaxInt64}, nil), 0.0)
}

// ApplyProjected projects a +Inf score, like every score Candidate.Score
// counts as no match, to the request's whole prompt uncached: it is not a
// full match that makes its endpoint the crowding rule's cheapest
// destination, and it does not hide a cheaper one behind the cold side's
// bound.
func TestFilterProjectedInfiniteScoreIsNoMatch(t *testing.T) {
	f := newFilter(t, DefaultConfig())
	const total = 10
	unc := tokenload.NewUncached(total*16, total, 16)
	warm := Candidate{Score: total, LoadKnown: true, OpenRequests: 10}
	for _, s := range []float64{math.Inf(1), math.Inf(-1), math.NaN(), -1} {
		got, o := f.ApplyProjected(nil, total, []Candidate{warm, {Score: s, LoadKnown: true}}, &unc)
		require.Equal(t, OutcomeSticky, o, "score %v", s) // 161 is not below 1.5 × 11
		require.Equal(t, []int{0}, got, "score %v", s)
	}
	// Warm: (0+1) × (100+1) = 101. +Inf: (160+1) × 1 = 161, not below
	// 151.5; 7.9 of 10 blocks: (34+1) × 1 = 35 is, and is the destination.
	warm.OpenRequests = 100
	got, o := f.ApplyProjected(nil, total, []Candidate{warm, {Score: math.Inf(1), LoadKnown: true}, {Score: 7.9, LoadKnown: true}}, &unc)
	require.Equal(t, OutcomeCrowded, o)
	require.Equal(t, []int{2}, got)
}

// The bound on the extra prefill keeps a request whose move would re-prefill
// a long shared context (the overload study's shape: 2,048 context tokens
// cached on the warm endpoint) where it is, and still lets a conversation
// move whose history is short to re-prefill (multi-turn's first turns).
func TestFilterCrowdingBoundsExtraPrefill(t *testing.T) {
	cfg := DefaultConfig()              // the rule on, bounded at 150 ms
	cfg.PeakPrefillThroughput = 10_000  // 150 ms: 1,500 tokens
	cfg.CrowdingUnboundRatio = new(0.0) // the bound never lifted (40 open requests against 0 would lift it by default)
	bounded := newFilter(t, cfg)
	cfg.CrowdingMaxExtraPrefill = new(time.Duration(0))
	unbounded := newFilter(t, cfg)

	// (2,432+1) × (0+1) = 2,433 < 1.5 × (384+1) × (8+1) = 5,197.5: crowded
	// without the bound; the move adds 2,048 tokens, above 1,500.
	_, o := apply(unbounded, 38, crowd(32, 384, 8), crowd(0, 2432, 0))
	require.Equal(t, OutcomeCrowded, o)
	got, o := apply(bounded, 38, crowd(32, 384, 8), crowd(0, 2432, 0))
	require.Equal(t, OutcomeSticky, o)
	require.Equal(t, []int{0}, got)

	// The move adds 1,024 tokens: within the bound.
	got, o = apply(bounded, 18, crowd(16, 128, 5), crowd(0, 1152, 0))
	require.Equal(t, OutcomeCrowded, o)
	require.Equal(t, []int{1}, got)

	// Only the destinations within the bound pass, the least crowded of
	// them; the bound is measured from the warmest sticky endpoint (64
	// uncached tokens). Sticky least cost (64+1) × (40+1) = 2,665; the cold
	// (2,000+1) × 1 = 2,001 is the cheaper but 1,936 tokens above the
	// warmest; (1,500+1) × 2 = 3,002 < 3,997.5 is 1,436 above: it passes.
	pair := []Candidate{crowd(17, 64, 40), crowd(16, 128, 30), crowd(0, 2000, 0), crowd(8, 1500, 1)}
	got, o = apply(unbounded, 18, pair...)
	require.Equal(t, OutcomeCrowded, o)
	require.Equal(t, []int{2}, got)
	got, o = apply(bounded, 18, pair...)
	require.Equal(t, OutcomeCrowded, o)
	require.Equal(t, []int{3}, got)
}

// Severe crowding lifts the bound on the extra prefill
// (Config.CrowdingUnboundRatio): a request whose warm endpoint streams many
// times the open requests of the least crowded cold one moves, although it
// re-prefills a long shared context (zipf-drift's shape: 2,432 tokens).
func TestFilterCrowdingUnboundWhenSevere(t *testing.T) {
	cfg := DefaultConfig()             // the rule on, bounded at 150 ms, lifted at 16
	cfg.PeakPrefillThroughput = 10_000 // 150 ms: 1,500 tokens
	require.Equal(t, 16.0, *cfg.CrowdingUnboundRatio)
	def := newFilter(t, cfg)
	cfg.CrowdingUnboundRatio = new(0.0)
	bounded := newFilter(t, cfg)
	cfg.CrowdingUnboundRatio = new(10.0)
	severe := newFilter(t, cfg)
	unknown := crowd(0, 2432, 0)
	unknown.LoadKnown = false
	// Warm (64+1) × (99+1) = 6,500; cold (2,432+1) × (1+1) = 4,866 < 9,750:
	// crowded, but the move adds 2,368 tokens, above 1,500.
	hot := []Candidate{crowd(38, 64, 99), crowd(0, 2432, 1), crowd(0, 2432, 3)}
	for _, tc := range []struct {
		name  string
		f     *Filter
		cands []Candidate
		o     Outcome
		want  []int
	}{
		{"never lifted at 0", bounded, hot, OutcomeSticky, []int{0}},
		{"99+1 >= 10 x (1+1): lifted", severe, hot, OutcomeCrowded, []int{1}},
		{"the default 16: 100 >= 16 x 2", def, hot, OutcomeCrowded, []int{1}},
		// Warm (64+1) × (40+1) = 2,665; 4,866 is not below 1.5 times it: the
		// rule does not fire, bound or not.
		{"not crowded", severe, []Candidate{crowd(38, 64, 40), crowd(0, 2432, 1)}, OutcomeSticky, []int{0}},
		// The ratio's edge: warm (400+1) × (18+1) = 7,619 and × (19+1) =
		// 8,020, both above 4,866 / 1.5; the move adds 2,032 tokens.
		{"just below the ratio: 18+1 < 10 x 2", severe, []Candidate{crowd(38, 400, 18), crowd(0, 2432, 1)}, OutcomeSticky, []int{0}},
		{"at the ratio: 19+1 = 10 x 2", severe, []Candidate{crowd(38, 400, 19), crowd(0, 2432, 1)}, OutcomeCrowded, []int{1}},
		// Unknown loads do not count towards the ratio: the only cold
		// endpoint with a known load has enough open requests (99+1 < 10 ×
		// 11) for the bound to hold.
		{"unknown loads left out", severe, []Candidate{crowd(38, 64, 99), unknown, crowd(0, 2432, 10)}, OutcomeSticky, []int{0}},
	} {
		got, o := apply(tc.f, 38, tc.cands...)
		require.Equal(t, tc.o, o, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
}
