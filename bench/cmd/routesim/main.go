package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/kvroute/kvroute/bench/internal/outdir"
	"github.com/kvroute/kvroute/bench/internal/sim"
	"github.com/kvroute/kvroute/internal/cliflag"
)

func main() {
	cliflag.Exit("routesim", run(context.Background(), os.Args[1:], os.Stdout))
}

// options are the command's flags.
type options struct {
	seed            uint64
	tieSeed         uint64
	loadTies        float64
	peerFromMetrics bool
	requests        int
	engines         int
	blocks          int
	replicas        int
	loads           string
	workloads       string
	policies        string
	eventDelay      time.Duration
	approxTTL       time.Duration
	parallel        int
	out             string
	sensitivity     bool
	cpuProfile      string
	rep             replicaOptions // replicas.go
	peerSeeds       int            // peers.go
	trace           traceOptions   // trace.go
	// -peer-stat-reuse and -peer-stat-reuse-policies (peers.go)
	peerReuse, peerReusePolicies string
	blocksSet                    bool            // -blocks was given
	overload                     overloadOptions // overload.go
	pd                           pdOptions       // pd.go
	lora                         loraOptions     // lora.go
	session                      sessionOptions  // session.go
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	def := sim.DefaultConfig(sim.SharedPrefix, 1)
	var o options
	fs := flag.NewFlagSet("routesim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Uint64Var(&o.seed, "seed", def.Seed, "random seed (same seed, same results)")
	fs.Uint64Var(&o.tieSeed, "tie-seed", 0, "seed of the policies' own random draws (tie-breaks, exploration) only: the same traffic, routed with other draws; do not combine with -peer-stat-reuse of a file made with another tie seed")
	fs.Float64Var(&o.loadTies, "load-tie-tolerance", 0, "kvroute's Config.LoadTieTolerance in every kvroute run: picks decided by load tie within this many times the best candidate's uncached tokens, broken by the request's prefix hash (an experiment; 0: kvroute's default)")
	fs.BoolVar(&o.peerFromMetrics, "kvroute-peer-load-from-metrics", false, "every kvroute router estimates the other gateway replicas' load on each engine from its scraped waiting and running requests (enginemetrics.PeerLoads; an experiment, off by default)")
	fs.IntVar(&o.requests, "requests", def.Workload.Requests, "requests per run")
	fs.IntVar(&o.engines, "engines", def.Fleet.Engines, "simulated engines")
	fs.IntVar(&o.blocks, "blocks", def.Fleet.NumGPUBlocks, "KV-cache blocks per engine")
	fs.IntVar(&o.replicas, "replicas", def.GatewayReplicas, "gateway replicas, each with its own policy instance")
	fs.StringVar(&o.loads, "loads", "0.25,0.5,0.75,1,1.25,1.5", "comma-separated loads (fractions of the fleet's prefill capacity)")
	fs.StringVar(&o.workloads, "workloads", joinNames(sim.AllWorkloads), "comma-separated workloads")
	fs.StringVar(&o.policies, "policies", joinNames(sim.AllPolicies), "comma-separated policies")
	fs.DurationVar(&o.eventDelay, "event-delay", def.EventDelay, "delay from an engine step to its KV events reaching the index")
	fs.DurationVar(&o.approxTTL, "approx-ttl", def.ApproxTTL, "how long the approximate router remembers a decision")
	fs.IntVar(&o.parallel, "parallel", runtime.GOMAXPROCS(0), "runs simulated at once (results do not depend on it)")
	fs.StringVar(&o.out, "out", "", "output directory (default <module root>/out/routesim, ignored by git; pass -out bench/results to update the committed results)")
	fs.BoolVar(&o.sensitivity, "sensitivity", true, "also run shared-prefix with a single gateway replica and append it to the report")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	addReplicaFlags(fs, &o.rep)
	fs.IntVar(&o.peerSeeds, "peer-stat-seeds", 0, "run only the comparison of kvroute with the peers' policies over traffic seeds 1..N at the loads ≥ 0.5 (writes routesim-peers.md and routesim-peers.json; 0: off)")
	addTraceFlags(fs, &o.trace)
	fs.StringVar(&o.peerReuse, "peer-stat-reuse", "", "with -peer-stat-seeds: take the runs of -peer-stat-reuse-policies from this earlier routesim-peers.json instead of running them again")
	fs.StringVar(&o.peerReusePolicies, "peer-stat-reuse-policies", "", "with -peer-stat-reuse: the comma-separated policies whose runs are reused")
	fs.BoolVar(&o.overload.on, "overload", false, "run only the admission-under-overload study (writes routesim-overload.md and routesim-overload.json)")
	fs.IntVar(&o.overload.requests, "overload-requests", sim.DefaultOverloadWorkload().Requests, "with -overload: requests per run")
	fs.StringVar(&o.overload.loads, "overload-loads", "0.5,1.25,1.5,2", "with -overload: comma-separated loads (multiples of the fleet's measured capacity)")
	fs.StringVar(&o.overload.kvroute, "overload-kvroute", "", "with -overload: the routing policy of the kvroute rows, a kvroute experiment policy such as kvroute-crowding (default: kvroute's default configuration)")
	fs.StringVar(&o.overload.policies, "overload-policies", "", "with -overload: comma-separated overload policies to run (default: all)")
	fs.Float64Var(&o.overload.capacity, "overload-capacity", 0, "with -overload: the fleet's capacity in requests/s that loads multiply (default 0: measured)")
	addPDFlags(fs, &o.pd)
	addLoRAFlags(fs, &o.lora)
	fs.BoolVar(&o.session.on, "session", false, "run only the session-affinity study: kvroute with and without session affinity and under Dynamo's session TTL rule, on multi-turn and agent traffic (writes routesim-session.md and routesim-session.json)")
	fs.IntVar(&o.session.requests, "session-requests", 2000, "with -session: requests per run")
	fs.StringVar(&o.session.loads, "session-loads", "0.5,0.9,1.2", "with -session: comma-separated loads")
	if err := cliflag.Parse(fs, args, os.Stdout); err != nil {
		return o, err
	}
	fs.Visit(func(f *flag.Flag) { o.blocksSet = o.blocksSet || f.Name == "blocks" })
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !(o.loadTies >= 0) || math.IsInf(o.loadTies, 0) {
		return o, fmt.Errorf("-load-tie-tolerance %v: must be a finite number >= 0", o.loadTies)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	ctx = sim.WithProgress(ctx, os.Stderr, "routesim") // a default run takes minutes
	base := sim.DefaultConfig(sim.SharedPrefix, 1)
	base.Seed, base.TieSeed, base.Fleet.Engines, base.Fleet.NumGPUBlocks = o.seed, o.tieSeed, o.engines, o.blocks
	base.GatewayReplicas, base.EventDelay, base.ApproxTTL = o.replicas, o.eventDelay, o.approxTTL
	base.LoadTieTolerance = o.loadTies
	base.KVRoutePeerLoadFromMetrics = o.peerFromMetrics
	loads, err := parseLoads(o.loads)
	if err != nil {
		return err
	}
	var workloads []sim.Workload
	for _, name := range splitList(o.workloads) {
		w := sim.DefaultWorkload(sim.WorkloadKind(name))
		w.Requests = o.requests
		workloads = append(workloads, w)
	}
	var policies []sim.Policy
	for _, name := range splitList(o.policies) {
		p, err := sim.ParsePolicy(name)
		if err != nil {
			return err
		}
		policies = append(policies, p)
	}
	if len(workloads) == 0 || len(policies) == 0 {
		return errors.New("need at least one workload and one policy")
	}
	if o.out, err = outdir.Resolve(o.out, DefaultOut); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if o.trace.path != "" {
		if !o.blocksSet {
			base.Fleet.NumGPUBlocks = sim.DefaultTraceBlocks
		}
		return runTrace(ctx, o, base, loads, policies, args, stdout)
	}
	if o.overload.on {
		return runOverload(o, base, args, stdout)
	}
	if o.pd.on {
		return runPD(o, base, args, stdout)
	}
	if o.lora.on {
		return runLoRA(o, args, stdout)
	}
	if o.session.on {
		return runSession(o, base, args, stdout)
	}
	if o.rep.only {
		return runReplicasOnly(ctx, o, base, loads, args, stdout)
	}
	if o.peerSeeds != 0 {
		return runPeersOnly(ctx, o, base, workloads, loads, args, stdout)
	}
	start := time.Now()
	results, err := sim.Sweep(ctx, base, workloads, loads, policies, o.parallel)
	if err != nil {
		return err
	}
	var sens []sim.Result
	if o.sensitivity && o.replicas != 1 && workloads[0].Kind == sim.SharedPrefix {
		one := base
		one.GatewayReplicas = 1
		if sens, err = sim.Sweep(ctx, one, workloads[:1], loads, sensitivityPolicies(policies), o.parallel); err != nil {
			return err
		}
	}
	var rep replicaRun
	if o.rep.enabled {
		if rep, err = replicaSweep(ctx, o, base, loads); err != nil {
			return err
		}
	}
	reps := rep.Replicas
	wall := time.Since(start)

	meta := sim.Meta{
		Command:   strings.TrimSpace("go run ./bench/cmd/routesim " + strings.Join(args, " ")),
		Generated: time.Now(), Wall: wall, Base: base, Workloads: workloads, Loads: loads,
		SVG: map[sim.WorkloadKind]string{},
	}
	for _, w := range workloads {
		name := "routesim-" + string(w.Kind) + ".svg"
		if err := writeFile(filepath.Join(o.out, name), func(f io.Writer) error { return sim.WriteSVG(f, w.Kind, results) }); err != nil {
			return err
		}
		meta.SVG[w.Kind] = name
	}
	err = writeFile(filepath.Join(o.out, "routesim.md"), func(f io.Writer) error {
		if err := sim.WriteMarkdown(f, meta, results); err != nil {
			return err
		}
		if len(reps) > 0 {
			if err := rep.write(f, o.rep.shared); err != nil {
				return err
			}
		}
		if len(sens) == 0 {
			return nil
		}
		err := sim.WriteCompactTable(f, "Sensitivity: a single gateway replica (shared-prefix)",
			fmt.Sprintf("The tables above run %d gateway replicas, as llm-d's precise prefix-cache routing guide runs its routers active-active: every event-fed replica subscribes to every engine, while each replica's decision history and load view are its own (the approximate router's and SGLang's trees, Dynamo's predicted index and active blocks, kvroute's in-flight load). With one replica each policy sees every decision:", o.replicas), sens)
		if err != nil {
			return err
		}
		return sim.WriteMissesTable(f, "Sensitivity: where kvroute's misses go with a single gateway replica (shared-prefix)",
			fmt.Sprintf("The decomposition of the section above for the single-replica sweep. Against the %d-replica table, what changes is placement and duplication: replicas without Config.Cluster do not see each other's speculative entries, so while a new group's first request waits for prefill another replica can place the same group on a second engine.", o.replicas), sens)
	})
	if err != nil {
		return err
	}
	err = writeFile(filepath.Join(o.out, "routesim.json"), func(f io.Writer) error {
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"base": base, "results": results, "singleReplica": sens, "replicas": reps})
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "routesim: %d runs in %v; wrote %s\n", len(results)+len(sens)+len(reps), wall.Round(time.Millisecond), filepath.Join(o.out, "routesim.md"))
	printTargets(stdout, results)
	printReplicaRows(stdout, reps)
	return nil
}

// printTargets prints the target evaluation, one line per workload and load.
func printTargets(stdout io.Writer, results []sim.Result) {
	for _, t := range sim.Targets(results) {
		fmt.Fprintf(stdout, "  %s load %.2f: kvroute hit %.1f%% (%.1f%% of the capacity bound %.1f%%, one engine %.1f%%), TTFT p90 %v (best peer %v %s; best other %v %s)\n",
			t.Workload, t.Load, t.HitRate*100, t.Ratio()*100, t.Bound*100, t.OneEngine*100, t.TTFTP90.Round(time.Millisecond),
			t.BestPeer.Round(time.Millisecond), t.BestPeerName, t.BestOther.Round(time.Millisecond), t.BestOtherName)
	}
}

// sensitivityPolicies are the policies of the single-replica sweep: those
// whose knowledge is per replica and changes with the replica count (their
// decision history or load view), without the baselines.
func sensitivityPolicies(policies []sim.Policy) []sim.Policy {
	var out []sim.Policy
	for _, p := range policies {
		switch p {
		case sim.KVRoute, sim.Dynamo, sim.SGLang, sim.Approximate:
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return policies
	}
	return out
}

func joinNames[T ~string](names []T) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ",")
}

func parseLoads(s string) ([]float64, error) {
	var loads []float64
	for _, f := range splitList(s) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("bad load %q: want a finite positive number", f)
		}
		loads = append(loads, v)
	}
	if len(loads) == 0 {
		return nil, errors.New("no loads")
	}
	return loads, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func writeFile(path string, fill func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// DefaultOut is the output directory under the module root when -out is not
// given; the repository's .gitignore ignores /out/, so a run never dirties
// the checkout.
const DefaultOut = "out/routesim"
