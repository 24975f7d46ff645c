package affinity

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kvroute/kvroute/tokenload"
)

// decideRef is the filter's decision as it was written before its pass was
// tuned (floats and math's min throughout; the crowding rule as first
// written, with its extra-prefill bound as a second pass), kept as the
// reference the tuned pass must agree with.
func decideRef(f *Filter, totalBlocks int, cands []Candidate) (Outcome, []int) {
	var dst []int
	if len(cands) <= 1 || totalBlocks <= 0 || f.threshold <= 0 {
		return OutcomeNotApplicable, dst
	}
	need := f.need(totalBlocks)
	const none = math.MaxFloat64
	nSticky, nCold := 0, 0
	bestSticky, bestCold := none, none
	crowdSticky, crowdCold := none, none
	openSticky, openCold := int64(math.MaxInt64), int64(math.MaxInt64)
	for i := range cands {
		c := &cands[i]
		isSticky := sticky(c.Score, need)
		if isSticky {
			nSticky++
			dst = append(dst, i)
		} else {
			nCold++
		}
		if !c.LoadKnown {
			continue
		}
		if isSticky {
			crowdSticky = min(crowdSticky, crowdingCost(c, nil))
			openSticky = min(openSticky, max(c.OpenRequests, 0))
		} else {
			crowdCold = min(crowdCold, crowdingCost(c, nil))
			openCold = min(openCold, max(c.OpenRequests, 0))
		}
		load := float64(max(c.InFlightTokens, 0))
		if f.cfg.IncludeRequestTokens {
			load += float64(max(c.RequestTokens, 0))
		}
		if isSticky {
			bestSticky = min(bestSticky, load)
		} else {
			bestCold = min(bestCold, load)
		}
	}
	switch {
	case nSticky == 0:
		return OutcomeNoMatch, dst
	case nCold == 0:
		return OutcomeSticky, dst
	case bestSticky == none || bestCold == none:
		if f.penaltyTokens <= 0 { // no gate: the crowding rule needs both sides' loads
			return OutcomeSticky, dst
		}
		return OutcomeMissingSignal, dst
	case f.penaltyTokens > 0 && bestSticky-bestCold > f.penaltyTokens:
		if f.cfg.IncludeRequestTokens {
			return OutcomeRequestLoadOverride, dst
		}
		return OutcomeLoadOverride, dst
	case f.crowding > 0 && openSticky > openCold && crowdCold < f.crowding*crowdSticky && boundedCold(f, need, cands) < f.crowding*crowdSticky:
		return OutcomeCrowded, dst
	}
	return OutcomeSticky, dst
}

// boundedCold is the least crowding cost among the non-sticky candidates
// with a known load whose uncached tokens exceed the least of the sticky
// ones' by at most the extra-prefill bound (all of them when there is none,
// or when the crowding is severe: Config.CrowdingUnboundRatio).
func boundedCold(f *Filter, need float64, cands []Candidate) float64 {
	warm := math.Inf(1)
	openSticky, openCold := math.Inf(1), math.Inf(1)
	for i := range cands {
		c := &cands[i]
		if !c.LoadKnown {
			continue
		}
		if sticky(c.Score, need) {
			warm = min(warm, float64(max(c.RequestTokens, 0)))
			openSticky = min(openSticky, float64(max(c.OpenRequests, 0)))
		} else {
			openCold = min(openCold, float64(max(c.OpenRequests, 0)))
		}
	}
	if f.unbound > 0 && !math.IsInf(openSticky, 1) && !math.IsInf(openCold, 1) && openSticky+1 >= f.unbound*(openCold+1) {
		warm = math.Inf(1) // severe crowding lifts the bound
	}
	least := math.MaxFloat64
	for i := range cands {
		c := &cands[i]
		if !c.LoadKnown || sticky(c.Score, need) {
			continue
		}
		if f.extraTokens > 0 && float64(max(c.RequestTokens, 0)) > warm+f.extraTokens {
			continue
		}
		least = min(least, crowdingCost(c, nil))
	}
	return least
}

// TestDecideIsReference holds the filter's decision to decideRef on random
// candidate sets: scores around the threshold (NaN and infinities among
// them), loads around the gate (negative, unknown and huge ones among
// them), with and without the request's tokens, with and without the
// crowding rule, with and without the gate.
func TestDecideIsReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, mode := range []struct {
		withRequest bool
		crowding    float64
		extra       time.Duration
		unbound     float64
		noGate      bool
	}{
		{false, ChatCrowdingRatio, 0, 0, false}, {true, ChatCrowdingRatio, 0, 0, false}, {false, 0, 0, 0, false}, {true, 0, 0, 0, false},
		{false, ChatCrowdingRatio, ChatCrowdingMaxExtraPrefill, 0, false}, {true, ChatCrowdingRatio, ChatCrowdingMaxExtraPrefill, 0, false},
		{false, ChatCrowdingRatio, ChatCrowdingMaxExtraPrefill, 2, false}, {true, ChatCrowdingRatio, ChatCrowdingMaxExtraPrefill, 2, false},
		{false, ChatCrowdingRatio, ChatCrowdingMaxExtraPrefill, 2, true}, {true, ChatCrowdingRatio, ChatCrowdingMaxExtraPrefill, 2, true},
	} {
		withRequest := mode.withRequest
		var penalty *time.Duration // the default
		if mode.noGate {
			penalty = new(time.Duration(0))
		}
		f := newFilter(t, Config{IncludeRequestTokens: withRequest, MaxTTFTPenalty: penalty, CrowdingRatio: new(mode.crowding), CrowdingMaxExtraPrefill: new(mode.extra), CrowdingUnboundRatio: new(mode.unbound)})
		unbounded := newFilter(t, Config{IncludeRequestTokens: withRequest, MaxTTFTPenalty: penalty, CrowdingRatio: new(mode.crowding), CrowdingMaxExtraPrefill: new(time.Duration(0))})
		gate := int64(newFilter(t, Config{}).GateTokens()) // the loads' scale, the default gate's
		bit, crowded := 0, 0                               // decisions the bound changed; crowded ones
		for range 20_000 {
			total := 1 + r.IntN(64)
			cands := make([]Candidate, r.IntN(20))
			for i := range cands {
				c := &cands[i]
				switch r.IntN(12) {
				case 0:
					c.Score = math.NaN()
				case 1:
					c.Score = math.Inf(1 - 2*r.IntN(2))
				default:
					c.Score = float64(r.IntN(total+2)) * []float64{1, 0.8, 0.999999999}[r.IntN(3)]
				}
				load := func() int64 {
					switch r.IntN(10) {
					case 0:
						return -r.Int64N(1000)
					case 1:
						return math.MaxInt64 - r.Int64N(1000)
					default:
						return r.Int64N(2 * gate)
					}
				}
				c.InFlightTokens, c.RequestTokens, c.LoadKnown = load(), load(), r.IntN(8) != 0
				if mode.extra > 0 && r.IntN(2) == 0 { // around the bound (2,389 tokens at the default throughput)
					c.RequestTokens = r.Int64N(8192)
				}
				c.OpenRequests = r.Int64N(8) - 1
			}
			wantO, want := decideRef(f, total, cands)
			gotO, got, _ := f.decide(nil, total, cands, nil)
			if gotO != wantO || !slices.Equal(got, want) {
				t.Fatalf("withRequest %v, total %d, %+v: decide %v %v, reference %v %v", withRequest, total, cands, gotO, got, wantO, want)
			}
			if o, _ := decideRef(unbounded, total, cands); o != wantO {
				bit++
			}
			if wantO == OutcomeCrowded {
				crowded++
			}
		}
		if mode.extra > 0 && (bit == 0 || crowded == 0) {
			t.Fatalf("withRequest %v: the random sets never exercised the bound (%d decisions changed by it, %d crowded)", withRequest, bit, crowded)
		}
	}
}

// ApplyProjected with RequestTokens left unset decides as Apply does with
// each candidate's RequestTokens set to the projection of its Score, a
// NaN, infinite or negative score projected as no match.
func TestApplyProjectedIsApply(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	// The second filter's bound on the extra prefill is 150 tokens
	// (150 ms at 1,000 tokens/s), within these prompts' lengths.
	for _, f := range []*Filter{
		newFilter(t, Config{CrowdingRatio: new(ChatCrowdingRatio), CrowdingMaxExtraPrefill: new(time.Duration(0))}),
		newFilter(t, Config{CrowdingRatio: new(ChatCrowdingRatio), CrowdingMaxExtraPrefill: new(ChatCrowdingMaxExtraPrefill), PeakPrefillThroughput: 1000}),
		newFilter(t, Config{CrowdingRatio: new(ChatCrowdingRatio), CrowdingMaxExtraPrefill: new(ChatCrowdingMaxExtraPrefill), PeakPrefillThroughput: 1000, CrowdingUnboundRatio: new(2.0)}),
	} {
		for range 5_000 {
			total := 1 + r.IntN(64)
			unc := tokenload.NewUncached(total*16-r.IntN(16), total, 16)
			bare := make([]Candidate, 2+r.IntN(16))
			for i := range bare {
				bare[i] = Candidate{Score: float64(r.IntN(total + 1)), InFlightTokens: r.Int64N(4096), LoadKnown: r.IntN(8) != 0, OpenRequests: r.Int64N(6)}
				if r.IntN(10) == 0 { // scores of no match
					bare[i].Score = []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1}[r.IntN(4)]
				}
			}
			full := slices.Clone(bare)
			for i := range full {
				if s := full[i].Score; s >= 0 && !math.IsInf(s, 1) {
					full[i].RequestTokens = unc.Of(s)
				} else {
					full[i].RequestTokens = unc.Of(0)
				}
			}
			want, wantO := f.Apply(nil, total, full)
			got, gotO := f.ApplyProjected(nil, total, bare, &unc)
			if gotO != wantO || !slices.Equal(got, want) {
				t.Fatalf("total %d, %+v: projected %v %v, given %v %v", total, bare, gotO, got, wantO, want)
			}
		}
	}
}
