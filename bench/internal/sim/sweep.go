package sim

import (
	"context"
	"fmt"
)

// Sweep runs every policy on every (workload, load) pair and returns the
// results in workload, load, policy order. Runs are independent and
// deterministic, so they are spread over parallel goroutines (at least 1)
// without changing any result. base supplies everything but the workload
// and the load. Each (workload, load) also runs the one-engine reference
// (OneEngine, round-robin), which fills every result's OneEngineHitRate and
// the Replacement and Placement terms of its Misses.
func Sweep(ctx context.Context, base Config, workloads []Workload, loads []float64, policies []Policy, parallel int) ([]Result, error) {
	type job struct {
		cfg    Config
		policy Policy
		slot   int
		ref    int // the slot of this (workload, load)'s one-engine reference
	}
	var jobs, refs []job
	for _, w := range workloads {
		for _, l := range loads {
			cfg := base
			cfg.Workload, cfg.Load = w, l
			if err := cfg.Validate(); err != nil {
				return nil, fmt.Errorf("%s at load %v: %w", w.Kind, l, err)
			}
			ref := len(refs)
			refs = append(refs, job{cfg: OneEngine(cfg), policy: RoundRobin, slot: ref})
			for _, p := range policies {
				jobs = append(jobs, job{cfg: cfg, policy: p, slot: len(jobs), ref: ref})
			}
		}
	}
	out := make([]Result, len(jobs))
	one := make([]Result, len(refs))
	runs := make([]simJob, 0, len(refs)+len(jobs))
	for _, j := range refs {
		runs = append(runs, simJob{cfg: j.cfg, policy: j.policy, what: fmt.Sprintf("%s, one-engine reference", j.cfg.Workload.Kind),
			done: func(r Result) { one[j.slot] = r }})
	}
	for _, j := range jobs {
		runs = append(runs, simJob{cfg: j.cfg, policy: j.policy, what: fmt.Sprintf("%s, %s", j.cfg.Workload.Kind, j.policy),
			done: func(r Result) { out[j.slot] = r }})
	}
	if err := runJobs(ctx, runs, parallel); err != nil {
		return nil, err
	}
	for _, j := range jobs {
		r := &out[j.slot]
		r.OneEngineHitRate = one[j.ref].HitRate
		if r.Misses != nil {
			r.Misses.split(r.BoundHitRate, r.LRUBoundHitRate, r.OneEngineHitRate)
		}
	}
	return out, nil
}
