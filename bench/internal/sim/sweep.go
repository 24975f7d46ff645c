package sim

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// Sweep runs every policy on every (workload, load) pair and returns the
// results in workload, load, policy order. Runs are independent and
// deterministic, so they are spread over parallel goroutines (at least 1)
// without changing any result. base supplies everything but the workload
// and the load.
func Sweep(ctx context.Context, base Config, workloads []Workload, loads []float64, policies []Policy, parallel int) ([]Result, error) {
	type job struct {
		cfg    Config
		policy Policy
		slot   int
	}
	var jobs []job
	for _, w := range workloads {
		for _, l := range loads {
			cfg := base
			cfg.Workload, cfg.Load = w, l
			if err := cfg.Validate(); err != nil {
				return nil, fmt.Errorf("%s at load %v: %w", w.Kind, l, err)
			}
			for _, p := range policies {
				jobs = append(jobs, job{cfg: cfg, policy: p, slot: len(jobs)})
			}
		}
	}
	out := make([]Result, len(jobs))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(parallel, 1))
	for _, j := range jobs {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			res, err := Run(j.cfg, j.policy)
			if err != nil {
				return fmt.Errorf("%s, %s at load %v: %w", j.cfg.Workload.Kind, j.policy, j.cfg.Load, err)
			}
			out[j.slot] = res
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}
