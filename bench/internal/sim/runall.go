package sim

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
)

// simJob is one run of a sweep: a configuration, the policy to route it
// with, what to call it in an error, and where its result goes.
type simJob struct {
	cfg    Config
	policy Policy
	what   string
	done   func(Result)
}

// runJobs runs every job, at most parallel at once, and stops at the first
// error (named after the job). Results do not depend on parallel: each run
// is deterministic and each job's done writes only its own slot.
func runJobs(ctx context.Context, jobs []simJob, parallel int) error {
	report := batchProgress(ctx, len(jobs))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(parallel, 1))
	for _, j := range jobs {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			res, err := Run(j.cfg, j.policy)
			if err != nil {
				return fmt.Errorf("%s at load %v: %w", j.what, j.cfg.Load, err)
			}
			j.done(res)
			report(fmt.Sprintf("%s at load %v", j.what, j.cfg.Load))
			return nil
		})
	}
	return g.Wait()
}

// replicaConfig is base at load with n gateway replicas behind a
// round-robin spread, sharing their state through shared when n > 1 and
// shared is set.
func replicaConfig(base Config, load float64, n int, shared *SharedState) Config {
	cfg := base
	cfg.Load, cfg.GatewayReplicas, cfg.RoundRobinReplicas, cfg.SharedState = load, n, true, nil
	if n > 1 && shared != nil {
		s := shared.withDefaults()
		cfg.SharedState = &s
	}
	return cfg
}

// runAll calls every run, at most parallel at once, waits for all of them
// and returns the error of the first run (in slice order) that failed; a
// failure does not stop the others. Results do not depend on parallel: each
// run is deterministic and writes only its own slot.
func runAll(parallel int, runs []func() error) error {
	sem := make(chan struct{}, max(parallel, 1))
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = run()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
