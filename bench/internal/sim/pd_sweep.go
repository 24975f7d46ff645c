package sim

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// PDVariant is one setting of the P/D study's sensitivity sweep: the
// pools' sizes and the decider's knobs.
type PDVariant struct {
	Prefill               int   `json:"prefill"`
	Decode                int   `json:"decode"`
	NonCachedTokens       int64 `json:"nonCachedTokens"`
	MaxPrefillQueueTokens int64 `json:"maxPrefillQueueTokens"`
	// NoCostRule runs the decider without its cost rule: every request at
	// or above NonCachedTokens splits (llm-d's prefix-based decider).
	NoCostRule bool `json:"noCostRule,omitempty"`
	// DecodeStallWeight is the cost rule's decodeStallWeight (0: disagg's
	// default; negative: no stall priced).
	DecodeStallWeight float64 `json:"decodeStallWeight,omitempty"`
	// BelowThresholdStallWeight is the cost rule's
	// belowThresholdStallWeight (0: disagg's default; negative: nothing
	// below the threshold splits).
	BelowThresholdStallWeight float64 `json:"belowThresholdStallWeight,omitempty"`
	// DecodeStallCap is the cost rule's decodeStallCap (0: disagg's
	// default; negative: no cap).
	DecodeStallCap float64 `json:"decodeStallCap,omitempty"`
}

func (v PDVariant) String() string {
	s := fmt.Sprintf("%dP+%dD, nonCachedTokens %d", v.Prefill, v.Decode, v.NonCachedTokens)
	if v.MaxPrefillQueueTokens > 0 {
		s += fmt.Sprintf(", maxPrefillQueueTokens %d", v.MaxPrefillQueueTokens)
	}
	if v.NoCostRule {
		s += ", cost rule off"
	} else if v.DecodeStallWeight < 0 {
		s += ", cost rule without the stall term at or above the threshold"
	} else if v.DecodeStallWeight > 0 {
		s += fmt.Sprintf(", decodeStallWeight %g", v.DecodeStallWeight)
	}
	if !v.NoCostRule && v.BelowThresholdStallWeight < 0 {
		s += ", nothing split below the threshold"
	} else if !v.NoCostRule && v.BelowThresholdStallWeight > 0 {
		s += fmt.Sprintf(", belowThresholdStallWeight %g", v.BelowThresholdStallWeight)
	}
	if !v.NoCostRule && v.DecodeStallCap < 0 {
		s += ", stall uncapped"
	} else if !v.NoCostRule && v.DecodeStallCap > 0 {
		s += fmt.Sprintf(", decodeStallCap %g", v.DecodeStallCap)
	}
	return s
}

// PDSweepRow is the decider's outcome under one variant: its TTFT p90 per
// load, the target rows met (against aggregated on the same GPUs, and
// against always-disaggregated and Dynamo's rule on the variant's pools)
// and the rows missed.
type PDSweepRow struct {
	Variant    PDVariant       `json:"variant"`
	DeciderP90 []time.Duration `json:"deciderP90"`
	Met        int             `json:"met"`
	Rows       int             `json:"rows"`
	Missed     []string        `json:"missed"`
}

// RunPDSweep runs the decider under every variant at every load against
// the fixed policies on the variant's pools (aggregated on the same total
// of engines), with c's capacity, and tallies the target per variant. The
// runs of a policy that do not depend on the decider's knobs are shared
// between variants.
func RunPDSweep(c PDConfig, loads []float64, variants []PDVariant, parallel int) ([]PDSweepRow, error) {
	type key struct {
		p    PDPolicy
		v    PDVariant // the knobs zeroed for the fixed policies, the pools too for aggregated
		load float64
	}
	keyOf := func(p PDPolicy, v PDVariant, l float64) key {
		switch p {
		case PDAggregated:
			v = PDVariant{Prefill: v.Prefill + v.Decode}
		case PDAlways, PDDynamo:
			v.NonCachedTokens, v.MaxPrefillQueueTokens, v.NoCostRule, v.DecodeStallWeight, v.BelowThresholdStallWeight, v.DecodeStallCap = 0, 0, false, 0, 0, 0
		}
		return key{p, v, l}
	}
	var keys []key
	seen := map[key]bool{}
	for _, v := range variants {
		for _, l := range loads {
			for _, p := range AllPDPolicies {
				if k := keyOf(p, v, l); !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
		}
	}
	got := make([]PDResult, len(keys))
	runs := make([]func() error, 0, len(keys))
	for i, k := range keys {
		cc := c
		cc.Load = k.load
		cc.Prefill, cc.Decode = k.v.Prefill, k.v.Decode
		if k.p == PDAggregated {
			cc.Prefill, cc.Decode = k.v.Prefill-1, 1 // the pools do not matter: every engine is both
		}
		cc.Decider.NonCachedTokens, cc.Decider.MaxPrefillQueueTokens, cc.Decider.CostRule = k.v.NonCachedTokens, k.v.MaxPrefillQueueTokens, !k.v.NoCostRule
		cc.Decider.DecodeStallWeight, cc.Decider.BelowThresholdStallWeight = k.v.DecodeStallWeight, k.v.BelowThresholdStallWeight
		cc.Decider.DecodeStallCap = k.v.DecodeStallCap
		runs = append(runs, func() (err error) {
			got[i], err = RunPD(cc, k.p)
			return err
		})
	}
	if err := runAll(parallel, runs); err != nil {
		return nil, err
	}
	res := make(map[key]PDResult, len(keys))
	for i, k := range keys {
		res[k] = got[i]
	}
	var rows []PDSweepRow
	for _, v := range variants {
		row := PDSweepRow{Variant: v}
		for _, l := range loads {
			d := res[keyOf(PDDecider, v, l)]
			row.DeciderP90 = append(row.DeciderP90, d.TTFTP90)
			if l < PDTargetMinLoad {
				continue
			}
			for _, p := range []PDPolicy{PDAggregated, PDAlways, PDDynamo} {
				o := res[keyOf(p, v, l)]
				row.Rows++
				if d.TTFTP90 <= o.TTFTP90 {
					row.Met++
				} else {
					row.Missed = append(row.Missed, fmt.Sprintf("%g× vs %s %+.0f %%", l, p, 100*(float64(d.TTFTP90)/float64(max(o.TTFTP90, 1))-1)))
				}
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// WritePDSweepMarkdown appends the sweep's table to a P/D report.
func WritePDSweepMarkdown(w io.Writer, loads []float64, rows []PDSweepRow) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("## Sensitivity: pool sizes and the decider's knobs\n\n")
	p("The decider's TTFT p90 per load and the target's rows under each setting: aggregated on the same number of GPUs, always-disaggregated and Dynamo's rule on the setting's pools, the same traffic and capacity.\n\n")
	p("| setting |")
	for _, l := range loads {
		p(" p90 at %g× |", l)
	}
	p(" rows met | missed |\n|---|")
	for range loads {
		p("---|")
	}
	p("---|---|\n")
	for _, r := range rows {
		p("| %s |", r.Variant)
		for _, d := range r.DeciderP90 {
			p(" %s |", fmtTTFT(d))
		}
		missed := strings.Join(r.Missed, "; ")
		if missed == "" {
			missed = "none"
		}
		p(" %d / %d | %s |\n", r.Met, r.Rows, missed)
	}
	p("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// DefaultPDVariants is the sweep the committed report carries: the
// default knobs on four splits of the same GPUs, then, on c's pools, the
// cost rule off (the threshold alone, llm-d's decider) or on without its
// stall term at or above the threshold (the request's own TTFT alone) or
// with nothing split below the threshold (belowThresholdStallWeight
// negative: the threshold alone decides the short prompts), the split
// threshold raised past a chat turn's new tokens (4,096) and past every
// prompt (nothing split by the threshold; the rule below it still
// splits), and the prefill-load rule at Dynamo's busy line (4 ×
// max_num_batched_tokens) and at twice it.
func DefaultPDVariants(c PDConfig) []PDVariant {
	n := c.Prefill + c.Decode
	d := c.Decider
	var out []PDVariant
	seen := map[int]bool{}
	for _, p := range []int{n / 4, n/2 - 1, n / 2, n/2 + 1, n/2 + 2, n - 1} {
		if p >= 1 && p < n && !seen[p] {
			seen[p] = true
			out = append(out, PDVariant{Prefill: p, Decode: n - p, NonCachedTokens: d.NonCachedTokens, MaxPrefillQueueTokens: d.MaxPrefillQueueTokens, NoCostRule: !d.CostRule, DecodeStallWeight: d.DecodeStallWeight, BelowThresholdStallWeight: d.BelowThresholdStallWeight, DecodeStallCap: d.DecodeStallCap})
		}
	}
	// The fleets short of prefill engines again without the stall's cap,
	// which is what the cap is for.
	for _, p := range []int{n / 4, n/2 - 1} {
		if p >= 1 && p < n {
			out = append(out, PDVariant{Prefill: p, Decode: n - p, NonCachedTokens: d.NonCachedTokens, MaxPrefillQueueTokens: d.MaxPrefillQueueTokens, NoCostRule: !d.CostRule, DecodeStallWeight: d.DecodeStallWeight, BelowThresholdStallWeight: d.BelowThresholdStallWeight, DecodeStallCap: -1})
		}
	}
	busy := 4 * int64(c.Base.Fleet.MaxNumBatchedTokens)
	base := PDVariant{Prefill: c.Prefill, Decode: c.Decode, NonCachedTokens: d.NonCachedTokens, MaxPrefillQueueTokens: d.MaxPrefillQueueTokens, NoCostRule: !d.CostRule, DecodeStallWeight: d.DecodeStallWeight, BelowThresholdStallWeight: d.BelowThresholdStallWeight, DecodeStallCap: d.DecodeStallCap}
	for _, m := range []func(*PDVariant){
		func(v *PDVariant) { v.NoCostRule = !v.NoCostRule },
		func(v *PDVariant) { v.NoCostRule, v.DecodeStallWeight = false, -1 },
		func(v *PDVariant) { v.NoCostRule, v.BelowThresholdStallWeight = false, -1 },
		func(v *PDVariant) { v.NoCostRule, v.DecodeStallCap = false, -1 },
		func(v *PDVariant) { v.NonCachedTokens = 4096 },
		func(v *PDVariant) { v.NonCachedTokens = 1 << 20 },
		func(v *PDVariant) { v.MaxPrefillQueueTokens = busy },
		func(v *PDVariant) { v.MaxPrefillQueueTokens = 2 * busy },
	} {
		v := base
		m(&v)
		out = append(out, v)
	}
	return out
}
