package sim

import "fmt"

// PDStudy is the P/D study's grid of runs and its target checks.
type PDStudy struct {
	Config   PDConfig      `json:"config"`
	Loads    []float64     `json:"loads"`
	Policies []PDPolicy    `json:"policies"`
	Results  []PDResult    `json:"results"`
	Targets  []TargetCheck `json:"targets"`
}

// PDTargetMinLoad is the lowest load the study's target applies to.
const PDTargetMinLoad = 0.5

// RunPDStudy measures the capacity if c.Capacity is 0, runs every policy
// at every load (parallel at once; results do not depend on it) and checks
// the target: the decider's TTFT p90 at or below aggregated's,
// always-disaggregated's and Dynamo's at every load of at least
// PDTargetMinLoad.
func RunPDStudy(c PDConfig, loads []float64, policies []PDPolicy, parallel int) (PDStudy, error) {
	if c.Capacity == 0 {
		cp, err := MeasurePDCapacity(c)
		if err != nil {
			return PDStudy{}, fmt.Errorf("sim: measuring capacity: %w", err)
		}
		c.Capacity = cp
	}
	st := PDStudy{Config: c, Loads: loads, Policies: policies, Results: make([]PDResult, len(loads)*len(policies))}
	runs := make([]func() error, 0, len(st.Results))
	for li, l := range loads {
		for pi, p := range policies {
			k, lc := li*len(policies)+pi, withPDLoad(c, l)
			runs = append(runs, func() (err error) {
				st.Results[k], err = RunPD(lc, p)
				return err
			})
		}
	}
	if err := runAll(parallel, runs); err != nil {
		return PDStudy{}, err
	}
	st.Targets = st.check()
	return st, nil
}

func withPDLoad(c PDConfig, l float64) PDConfig {
	c.Load = l
	return c
}

// Result returns the run of p at load l, if the study has it.
func (st PDStudy) Result(p PDPolicy, l float64) (PDResult, bool) {
	for _, r := range st.Results {
		if r.Policy == p && r.Load == l {
			return r, true
		}
	}
	return PDResult{}, false
}

// check compares the decider's TTFT p90 with each other policy's at every
// load of at least PDTargetMinLoad.
func (st PDStudy) check() []TargetCheck {
	var out []TargetCheck
	for _, l := range st.Loads {
		if l < PDTargetMinLoad {
			continue
		}
		d, ok := st.Result(PDDecider, l)
		if !ok {
			continue
		}
		for _, p := range st.Policies {
			if p == PDDecider {
				continue
			}
			o, ok := st.Result(p, l)
			if !ok {
				continue
			}
			out = append(out, TargetCheck{
				Target: fmt.Sprintf("%s TTFT p90 ≤ %s's", PDDecider, p),
				Row:    fmt.Sprintf("%g×", l),
				Met:    d.TTFTP90 <= o.TTFTP90,
				Detail: fmt.Sprintf("%s vs %s (%+.0f %%)", fmtTTFT(d.TTFTP90), fmtTTFT(o.TTFTP90), 100*(float64(d.TTFTP90)/float64(max(o.TTFTP90, 1))-1)),
			})
		}
	}
	return out
}

// pdCapacityProbeLoad is the offered load, as a multiple of the
// aggregated fleet's no-hit prefill capacity, at which MeasurePDCapacity
// keeps the fleet backlogged.
const pdCapacityProbeLoad = 10

// MeasurePDCapacity returns the aggregated fleet's capacity on c's
// workload in requests per second: the completion rate of the aggregated
// policy (kvroute's default Router over Prefill + Decode both-role
// engines) with the fleet kept backlogged, completions over the time from
// the first arrival to the last completion, as MeasureCapacity does for
// the overload study. The sessions' last turns follow their previous ones
// one by one after the backlog has drained, so this rate errs low: at
// load 1 the aggregated fleet is busy but not yet swamped. Every policy's
// loads are multiples of this one rate: the same GPUs, the same offered
// traffic.
func MeasurePDCapacity(c PDConfig) (float64, error) {
	w := c.Workload
	f := c.Base.Fleet
	chat := float64(w.SystemTokens+w.UserTokens) + float64(w.Turns-1)/2*float64(w.UserTokens+w.OutputTokens)
	mean := w.DocumentFraction*float64(w.DocumentTokens) + (1-w.DocumentFraction)*chat
	c.Capacity = float64(c.Prefill+c.Decode) * f.PrefillTokensPerSecond / mean
	c.Load = pdCapacityProbeLoad
	res, err := RunPD(c, PDAggregated)
	if err != nil {
		return 0, err
	}
	if res.Makespan <= 0 {
		return 0, ErrStalled
	}
	return float64(res.Completed) / res.Makespan.Seconds(), nil
}
