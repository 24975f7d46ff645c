package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kvroute/kvroute/bench/internal/sim"
	"github.com/kvroute/kvroute/cluster"
)

// replicaOptions are the flags of the router-replica sweep.
type replicaOptions struct {
	enabled bool
	only    bool
	counts  string
	shared  sim.SharedState
}

func addReplicaFlags(fs *flag.FlagSet, o *replicaOptions) {
	fs.BoolVar(&o.enabled, "replica-sweep", true, "also run the router-replica sweep (R kvroute Routers, local-only vs shared state) on shared-prefix and append it to the report")
	fs.BoolVar(&o.only, "replica-sweep-only", false, "run only the router-replica sweep (writes routesim-replicas.md and routesim-replicas.json)")
	fs.StringVar(&o.counts, "replica-counts", "1,2,4", "comma-separated router replica counts of the replica sweep")
	fs.DurationVar(&o.shared.RefreshPeriod, "replica-refresh", cluster.DefaultRefreshPeriod, "shared state: how often a replica publishes its load")
	fs.DurationVar(&o.shared.ReadPeriod, "replica-read", cluster.DefaultReadPeriod, "shared state: how often a replica reads its peers' load")
	fs.DurationVar(&o.shared.PublishInterval, "replica-publish-interval", cluster.DefaultPublishInterval, "shared state: least time between two decision messages of a replica")
	fs.DurationVar(&o.shared.RedisRTT, "replica-redis-rtt", sim.DefaultRedisRTT, "shared state: round trip between a replica and Redis (virtual time)")
}

// replicaSweep runs the router-replica sweep on shared-prefix traffic of
// the run's size at loads.
func replicaSweep(ctx context.Context, o options, base sim.Config, loads []float64) ([]sim.ReplicaResult, sim.Config, error) {
	var counts []int
	for _, f := range splitList(o.rep.counts) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, base, fmt.Errorf("bad replica count %q", f)
		}
		counts = append(counts, n)
	}
	if len(counts) == 0 {
		return nil, base, fmt.Errorf("no replica counts")
	}
	base.Workload = sim.DefaultWorkload(sim.SharedPrefix)
	base.Workload.Requests = o.requests
	res, err := sim.ReplicaSweep(ctx, base, loads, counts, o.rep.shared, o.parallel)
	return res, base, err
}

// runReplicasOnly is -replica-sweep-only: the sweep alone, in its own files.
func runReplicasOnly(ctx context.Context, o options, base sim.Config, loads []float64, stdout io.Writer) error {
	start := time.Now()
	res, base, err := replicaSweep(ctx, o, base, loads)
	if err != nil {
		return err
	}
	err = writeFile(filepath.Join(o.out, "routesim-replicas.md"), func(f io.Writer) error {
		fmt.Fprintf(f, "# Router replicas (go run ./bench/cmd/routesim -replica-sweep-only)\n\nGenerated %s in %v of host time.\n",
			time.Now().UTC().Format(time.RFC3339), time.Since(start).Round(time.Second))
		return sim.WriteReplicaTable(f, base, o.rep.shared, res)
	})
	if err != nil {
		return err
	}
	err = writeFile(filepath.Join(o.out, "routesim-replicas.json"), func(f io.Writer) error {
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"base": base, "replicas": res})
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "routesim: %d replica runs in %v; wrote %s\n", len(res), time.Since(start).Round(time.Millisecond),
		filepath.Join(o.out, "routesim-replicas.md"))
	printReplicaRows(stdout, res)
	return nil
}

func printReplicaRows(w io.Writer, res []sim.ReplicaResult) {
	for _, r := range sim.ReplicaRows(res) {
		fmt.Fprintf(w, "  replicas %d load %.2f: TTFT p90 local-only %v (hit %.1f%%), shared %v (hit %.1f%%, %+.1f%% vs one replica)\n",
			r.Replicas, r.Load, r.Local.TTFTP90.Round(time.Millisecond), r.Local.HitRate*100,
			r.Shared.TTFTP90.Round(time.Millisecond), r.Shared.HitRate*100, r.SharedVs1*100)
	}
}
