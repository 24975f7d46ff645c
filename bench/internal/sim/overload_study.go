package sim

import (
	"fmt"
	"math"
	"slices"
)

// OverloadLoads are the study's loads, as multiples of the measured
// capacity: one below it (the reference) and three overload levels.
var OverloadLoads = []float64{0.5, 1.25, 1.5, 2}

// OverloadStudy is the overload study's grid of runs and its targets.
type OverloadStudy struct {
	Config   OverloadConfig   `json:"config"`
	Loads    []float64        `json:"loads"`
	Policies []OverloadPolicy `json:"policies"`
	Results  []OverloadResult `json:"results"`
	Targets  []TargetCheck    `json:"targets"`
	// Headroom is kvroute+admission at the highest load with the dispatch
	// gate off and at several KV-cache headrooms: what the gate's
	// threshold trades (interactive TTFT against batch shed).
	Headroom []HeadroomRow `json:"headroom"`
	// Contention is kvroute+admission at the highest load with
	// ContentionInteractiveFraction of the traffic interactive: enough for
	// both tenants to wait in the admission queue at once, which the
	// study's own mix (the gate keeps interactive requests from queuing)
	// does not produce. The tenant-share target is checked on it.
	Contention *OverloadResult `json:"contention,omitempty"`
}

// ContentionInteractiveFraction is the interactive share of the contention
// run's traffic.
const ContentionInteractiveFraction = 0.9

// HeadroomRow is one run of the headroom sweep.
type HeadroomRow struct {
	// Gate is false for the run without the dispatch gate; MaxKVCache is
	// the gate's admission.Headroom.MaxKVCache otherwise.
	Gate       bool           `json:"gate"`
	MaxKVCache float64        `json:"maxKVCache"`
	Result     OverloadResult `json:"result"`
}

// HeadroomSweep are the KV-cache headrooms the study sweeps at its highest
// load, besides the gate turned off.
var HeadroomSweep = []float64{0.9, 0.8, 0.7, 0.6, 0.5}

// TargetCheck is one target on one row of the study.
type TargetCheck struct {
	Target string `json:"target"`
	Row    string `json:"row"`
	Met    bool   `json:"met"`
	// NA marks a row the target does not apply to (no contention arose).
	NA     bool   `json:"na,omitempty"`
	Detail string `json:"detail"`
}

// RunOverloadStudy measures the capacity if oc.Capacity is 0, runs every
// policy at every load (parallel at once; results do not depend on it)
// and checks the targets.
func RunOverloadStudy(oc OverloadConfig, loads []float64, policies []OverloadPolicy, parallel int) (OverloadStudy, error) {
	if oc.Capacity == 0 {
		c, err := MeasureCapacity(oc)
		if err != nil {
			return OverloadStudy{}, fmt.Errorf("sim: measuring capacity: %w", err)
		}
		oc.Capacity = c
	}
	st := OverloadStudy{Config: oc, Loads: loads, Policies: policies, Results: make([]OverloadResult, len(loads)*len(policies))}
	runs := make([]func() error, 0, len(st.Results))
	for li, l := range loads {
		for pi, p := range policies {
			k, c := li*len(policies)+pi, withLoad(oc, l)
			runs = append(runs, func() (err error) {
				st.Results[k], err = RunOverload(c, p)
				return err
			})
		}
	}
	if slices.Contains(policies, OverloadAdmission) && len(loads) > 0 {
		hi := slices.Max(loads)
		st.Headroom = make([]HeadroomRow, 1+len(HeadroomSweep))
		for i := range st.Headroom {
			c := withLoad(oc, hi)
			row := HeadroomRow{Gate: i > 0}
			if i == 0 {
				c.Gate = false
			} else {
				c.Gate, row.MaxKVCache = true, HeadroomSweep[i-1]
				c.Admission.Headroom.MaxKVCache = row.MaxKVCache
			}
			st.Headroom[i] = row
			runs = append(runs, func() (err error) {
				st.Headroom[i].Result, err = RunOverload(c, OverloadAdmission)
				return err
			})
		}
	}
	if slices.Contains(policies, OverloadAdmission) && len(loads) > 0 {
		c := withLoad(oc, slices.Max(loads))
		c.Workload.InteractiveFraction = ContentionInteractiveFraction
		st.Contention = &OverloadResult{}
		runs = append(runs, func() (err error) {
			*st.Contention, err = RunOverload(c, OverloadAdmission)
			return err
		})
	}
	if err := runAll(parallel, runs); err != nil {
		return OverloadStudy{}, err
	}
	st.Targets = st.check()
	return st, nil
}

func withLoad(oc OverloadConfig, l float64) OverloadConfig {
	oc.Load = l
	return oc
}

// result returns the run of p at load l, if any.
func (st OverloadStudy) result(p OverloadPolicy, l float64) (OverloadResult, bool) {
	for _, r := range st.Results {
		if r.Policy == p && r.Load == l {
			return r, true
		}
	}
	return OverloadResult{}, false
}

// ShareTolerance is the fair-share target: under contention each of two
// backlogged tenants gets half the dispatches, within 10 % of that half.
const ShareTolerance = 0.10

// check evaluates the four targets on kvroute+admission's rows.
func (st OverloadStudy) check() []TargetCheck {
	var out []TargetCheck
	adm := OverloadAdmission
	lo, hi := slices.Min(st.Loads), slices.Max(st.Loads)
	if a, ok := st.result(adm, lo); ok && hi > 1 {
		if b, ok := st.result(adm, hi); ok {
			met := a.InteractiveTTFTP90 > 0 && b.InteractiveTTFTP90 >= 0 && b.InteractiveTTFTP90 <= 2*a.InteractiveTTFTP90
			out = append(out, TargetCheck{Target: "interactive TTFT p90 at the highest load ≤ 2× its p90 at the lowest", Row: fmt.Sprintf("%s %g× vs %g×", adm, hi, lo), Met: met,
				Detail: fmt.Sprintf("%s vs %s (ratio %.2f)", fmtTTFT(b.InteractiveTTFTP90), fmtTTFT(a.InteractiveTTFTP90), float64(b.InteractiveTTFTP90)/float64(max(a.InteractiveTTFTP90, 1)))})
		}
	}
	for _, l := range st.Loads {
		r, ok := st.result(adm, l)
		if !ok {
			continue
		}
		row := fmt.Sprintf("%s %g×", adm, l)
		out = append(out, TargetCheck{Target: "no interactive request refused while batch requests are queued", Row: row,
			Met:    r.InteractiveRefusedWhileBatchQueued == 0 && r.PriorityInversions == 0,
			Detail: fmt.Sprintf("%d interactive refusals with batch queued, %d batch releases ahead of queued interactive requests", r.InteractiveRefusedWhileBatchQueued, r.PriorityInversions)})
		if l > 1 {
			share := TargetCheck{Target: "tenant shares within 10 % of equal under contention", Row: row,
				Met:    r.Contended > 0 && math.Abs(r.TenantAShare-0.5) <= 0.5*ShareTolerance,
				Detail: fmt.Sprintf("tenant A %s of %d contended releases (offered 75 %%)", fmtShare(r.TenantAShare), r.Contended)}
			if r.Contended == 0 {
				share.NA, share.Detail = true, "no contention: both tenants never waited at once"
			}
			out = append(out, share)
			met, worst := true, ""
			for _, p := range st.Policies {
				if p == adm {
					continue
				}
				if q, ok := st.result(p, l); ok && q.Goodput > r.Goodput {
					met, worst = false, fmt.Sprintf("; %s %.1f/s is higher", p, q.Goodput)
				}
			}
			out = append(out, TargetCheck{Target: "goodput at or above every peer's", Row: row, Met: met,
				Detail: fmt.Sprintf("%.1f/s%s", r.Goodput, worst)})
		}
	}
	if r := st.Contention; r != nil {
		share := TargetCheck{Target: "tenant shares within 10 % of equal under contention",
			Row:    fmt.Sprintf("%s %g× with %.0f %% interactive traffic", adm, r.Load, 100*ContentionInteractiveFraction),
			Met:    r.Contended > 0 && math.Abs(r.TenantAShare-0.5) <= 0.5*ShareTolerance,
			Detail: fmt.Sprintf("tenant A %s of %d contended releases (offered 75 %%)", fmtShare(r.TenantAShare), r.Contended)}
		if r.Contended == 0 {
			share.NA, share.Detail = true, "no contention: both tenants never waited at once"
		}
		out = append(out, share)
	}
	return out
}

func fmtShare(s float64) string {
	if s < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f %%", 100*s)
}
