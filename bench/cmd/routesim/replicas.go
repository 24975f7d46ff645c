package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kvroute/kvroute/bench/internal/sim"
	"github.com/kvroute/kvroute/cluster"
)

// replicaOptions are the flags of the router-replica sweep.
type replicaOptions struct {
	enabled   bool
	only      bool
	counts    string
	seeds     string // -replica-sweep-only: the seeds to run; empty: -seed
	stats     int    // -replica-sweep-only: traffic seeds of the comparison over seeds; 0: none
	statLoads string // loads of that comparison; empty: the sweep's loads above 1
	parts     string // with stats: the decomposition's parts, run for every R > 1 row
	shared    sim.SharedState
}

func addReplicaFlags(fs *flag.FlagSet, o *replicaOptions) {
	fs.BoolVar(&o.enabled, "replica-sweep", true, "also run the router-replica sweep (R kvroute Routers, local-only vs shared state) on shared-prefix and append it to the report")
	fs.BoolVar(&o.only, "replica-sweep-only", false, "run only the router-replica sweep (writes routesim-replicas.md and routesim-replicas.json)")
	fs.StringVar(&o.counts, "replica-counts", "1,2,4", "comma-separated router replica counts of the replica sweep")
	fs.StringVar(&o.seeds, "replica-seeds", "", "with -replica-sweep-only: comma-separated seeds, one sweep each in one report (default: -seed)")
	fs.IntVar(&o.stats, "replica-stat-seeds", 0, "with -replica-sweep-only: compare R = 1 and the shared rows over traffic seeds 1..N, mean TTFT p90 with a bootstrap interval (0: off)")
	fs.StringVar(&o.parts, "replica-decompose", "", "with -replica-stat-seeds: comma-separated parts of the decomposition to run for every R > 1 row over the same seeds ("+joinParts()+"); empty: none")
	fs.StringVar(&o.statLoads, "replica-stat-loads", "", "loads of the comparison over seeds (default: the sweep's loads above 1, the overloaded ones)")
	fs.DurationVar(&o.shared.RefreshPeriod, "replica-refresh", cluster.DefaultRefreshPeriod, "shared state: how often a replica publishes its load")
	fs.DurationVar(&o.shared.ReadPeriod, "replica-read", cluster.DefaultReadPeriod, "shared state: how often a replica reads its peers' load")
	fs.DurationVar(&o.shared.PublishInterval, "replica-publish-interval", cluster.DefaultPublishInterval, "shared state: least time between two decision messages of a replica")
	fs.DurationVar(&o.shared.RedisRTT, "replica-redis-rtt", sim.DefaultRedisRTT, "shared state: round trip between a replica and Redis (virtual time)")
	fs.DurationVar(&o.shared.LeaderRTT, "replica-leader-rtt", 0, "shared state, experiment: replica 0 picks for every replica; a request reaching another replica is picked this round trip later (0: off)")
	fs.BoolVar(&o.shared.LeaderChangesInstant, "replica-leader-instant", false, "with -replica-leader-rtt: the forwarded requests' load changes reach replica 0 at once (a control: one router with some arrivals later)")
	fs.BoolVar(&o.shared.Exact.Load, "replica-exact-load", false, "shared state, decomposition only: every Pick sees the peers' exact load (decisions keep their delay)")
	fs.BoolVar(&o.shared.Exact.All, "replica-exact-all", false, "shared state, decomposition only: every decision and load change reaches the peers at once")
}

// replicaSweep runs the router-replica sweep on shared-prefix traffic of
// the run's size at loads, and the tie-order sensitivity when asked.
func replicaSweep(ctx context.Context, o options, base sim.Config, loads []float64) (replicaRun, error) {
	counts, err := o.rep.countsOf()
	if err != nil {
		return replicaRun{}, err
	}
	base.Workload = sim.DefaultWorkload(sim.SharedPrefix)
	base.Workload.Requests = o.requests
	rr := replicaRun{Seed: base.Seed, Base: base}
	rr.Replicas, err = sim.ReplicaSweep(ctx, base, loads, counts, o.rep.shared, o.parallel)
	return rr, err
}

// replicaRun is the replica sweep of one seed.
type replicaRun struct {
	Seed     uint64              `json:"seed"`
	Base     sim.Config          `json:"base"`
	Replicas []sim.ReplicaResult `json:"replicas"`
}

// write appends the run's sections to a report.
func (rr replicaRun) write(w io.Writer, shared sim.SharedState) error {
	return sim.WriteReplicaTable(w, rr.Base, shared, rr.Replicas)
}

// countsOf returns the replica counts of the sweep.
func (o replicaOptions) countsOf() ([]int, error) {
	var counts []int
	for _, f := range splitList(o.counts) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad replica count %q", f)
		}
		counts = append(counts, n)
	}
	if len(counts) == 0 {
		return nil, fmt.Errorf("no replica counts")
	}
	return counts, nil
}

// statLoadsOf returns the loads of the comparison over seeds.
func (o replicaOptions) statLoadsOf(loads []float64) ([]float64, error) {
	if o.stats < 0 {
		return nil, fmt.Errorf("bad -replica-stat-seeds %d", o.stats)
	}
	if o.statLoads != "" {
		return parseLoads(o.statLoads)
	}
	var out []float64
	for _, l := range loads {
		if l > 1 {
			out = append(out, l)
		}
	}
	return out, nil
}

// partsOf returns the decomposition's parts.
func (o replicaOptions) partsOf() ([]sim.ReplicaPart, error) {
	var out []sim.ReplicaPart
	for _, f := range splitList(o.parts) {
		p, err := sim.ParseReplicaPart(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if len(out) > 0 && o.stats == 0 {
		return nil, fmt.Errorf("-replica-decompose needs -replica-stat-seeds")
	}
	return out, nil
}

func joinParts() string {
	var s []string
	for _, p := range sim.AllReplicaParts {
		s = append(s, string(p))
	}
	return strings.Join(s, ", ")
}

// seedsOf returns the seeds of -replica-sweep-only.
func (o replicaOptions) seedsOf(def uint64) ([]uint64, error) {
	if o.seeds == "" {
		return []uint64{def}, nil
	}
	var out []uint64
	for _, f := range splitList(o.seeds) {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad replica seed %q", f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no replica seeds")
	}
	return out, nil
}

// runReplicasOnly is -replica-sweep-only: the sweep alone, per seed, in its
// own files.
func runReplicasOnly(ctx context.Context, o options, base sim.Config, loads []float64, args []string, stdout io.Writer) error {
	start := time.Now()
	seeds, err := o.rep.seedsOf(base.Seed)
	if err != nil {
		return err
	}
	statLoads, err := o.rep.statLoadsOf(loads)
	if err != nil {
		return err
	}
	var runs []replicaRun
	known := map[uint64][]sim.ReplicaResult{}
	for _, seed := range seeds {
		b := base
		b.Seed = seed
		rr, err := replicaSweep(ctx, o, b, loads)
		if err != nil {
			return fmt.Errorf("seed %d: %w", seed, err)
		}
		runs = append(runs, rr)
		known[seed] = rr.Replicas
	}
	parts, err := o.rep.partsOf()
	if err != nil {
		return err
	}
	var stats []sim.SeedRow
	var decomposed [][]sim.ReplicaPartRow
	if o.rep.stats > 0 && len(statLoads) > 0 {
		counts, err := o.rep.countsOf()
		if err != nil {
			return err
		}
		statSeeds := make([]uint64, o.rep.stats)
		for i := range statSeeds {
			statSeeds[i] = uint64(i + 1)
		}
		b := base
		b.Workload = sim.DefaultWorkload(sim.SharedPrefix)
		b.Workload.Requests = o.requests
		if stats, err = sim.SeedSweep(ctx, b, statLoads, counts, o.rep.shared, statSeeds, known, o.parallel); err != nil {
			return err
		}
		for _, row := range stats {
			if row.Replicas == 1 || len(parts) == 0 {
				continue
			}
			d, err := sim.DecomposeReplicas(ctx, b, row, o.rep.shared, parts, o.parallel)
			if err != nil {
				return err
			}
			decomposed = append(decomposed, d)
		}
	}
	err = writeFile(filepath.Join(o.out, "routesim-replicas.md"), func(f io.Writer) error {
		fmt.Fprintf(f, "# Router replicas (%s)\n\nGenerated %s in %v of host time.\n",
			strings.TrimSpace("go run ./bench/cmd/routesim "+strings.Join(args, " ")),
			time.Now().UTC().Format(time.RFC3339), time.Since(start).Round(time.Second))
		if l := o.rep.shared.LeaderRTT; l > 0 {
			changes := fmt.Sprintf("their first chunks and ends reach its load accounting %v after they happen", l/2)
			if o.rep.shared.LeaderChangesInstant {
				changes = "their first chunks and ends reach its load accounting at once, so the R-replica rows are one router whose requests from the other replicas arrive later, nothing else changed"
			}
			fmt.Fprintf(f, "\n**Experiment, not package cluster's design: one picker for every replica** (`-replica-leader-rtt %v`). Replica 0 picks for all R replicas: a request reaching another replica is picked by it %v later (the round trip of forwarding it), and %s.\n", l, l, changes)
		}
		if len(runs) > 1 {
			fmt.Fprintf(f, "\nRows meeting the target (shared state, TTFT p90 within %.0f %% of R = 1's), per seed:\n\n| seed | rows met | rows missed |\n|---:|---:|---|\n", sim.ReplicaTolerance*100)
			for _, rr := range runs {
				met, rows, missed := 0, sim.ReplicaRows(rr.Replicas), []string(nil)
				for _, r := range rows {
					if r.OK {
						met++
					} else {
						missed = append(missed, fmt.Sprintf("R=%d @%.2f %+.1f%%", r.Replicas, r.Load, r.SharedVs1*100))
					}
				}
				fmt.Fprintf(f, "| %d | %d of %d | %s |\n", rr.Seed, met, len(rows), strings.Join(missed, ", "))
			}
		}
		if _, _, err := sim.WriteSeedTable(f, stats); err != nil {
			return err
		}
		for _, d := range decomposed {
			sim.WriteReplicaParts(f, o.rep.shared, d)
		}
		for _, rr := range runs {
			if err := rr.write(f, o.rep.shared); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = writeFile(filepath.Join(o.out, "routesim-replicas.json"), func(f io.Writer) error {
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"seeds": runs, "overSeeds": stats, "decomposition": decomposed})
	})
	if err != nil {
		return err
	}
	n := 0
	for _, rr := range runs {
		n += len(rr.Replicas)
	}
	for _, r := range stats {
		if r.Replicas > 1 {
			n += len(r.Seeds) // at most: some came from the per-seed sweeps
		}
	}
	fmt.Fprintf(stdout, "routesim: %d replica runs in %v; wrote %s\n", n, time.Since(start).Round(time.Millisecond),
		filepath.Join(o.out, "routesim-replicas.md"))
	for _, rr := range runs {
		fmt.Fprintf(stdout, " seed %d:\n", rr.Seed)
		printReplicaRows(stdout, rr.Replicas)
	}
	return nil
}

func printReplicaRows(w io.Writer, res []sim.ReplicaResult) {
	for _, r := range sim.ReplicaRows(res) {
		fmt.Fprintf(w, "  replicas %d load %.2f: TTFT p90 local-only %v (hit %.1f%%), shared %v (hit %.1f%%, %+.1f%% vs one replica)\n",
			r.Replicas, r.Load, r.Local.TTFTP90.Round(time.Millisecond), r.Local.HitRate*100,
			r.Shared.TTFTP90.Round(time.Millisecond), r.Shared.HitRate*100, r.SharedVs1*100)
	}
}
