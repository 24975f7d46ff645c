package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvroute/kvroute/bench/internal/sim"
)

// traceOptions are the trace-replay flags.
type traceOptions struct {
	path     string
	start    int
	requests int
}

func addTraceFlags(fs *flag.FlagSet, o *traceOptions) {
	fs.StringVar(&o.path, "trace", "", "replay this Mooncake trace (JSONL: timestamp, input_length, output_length, hash_ids) instead of the synthetic workloads; writes routesim-trace.md and .json (-blocks defaults to 7168 with it)")
	fs.IntVar(&o.start, "trace-start", 0, "with -trace: the first request replayed, counted from 0 (line -trace-start+1)")
	fs.IntVar(&o.requests, "trace-requests", 0, "with -trace: how many consecutive requests to replay (0: all from -trace-start on)")
}

// loadTrace decodes the -trace file's window into its workload.
func loadTrace(o traceOptions) (sim.Workload, error) {
	f, err := os.Open(o.path)
	if err != nil {
		return sim.Workload{}, err
	}
	defer f.Close()
	td, err := sim.ReadMooncakeTrace(f, filepath.Base(o.path), sim.TraceWindow{Start: o.start, Count: o.requests})
	if err != nil {
		return sim.Workload{}, fmt.Errorf("%s: %w", o.path, err)
	}
	return sim.TraceWorkload(td), nil
}

// runTrace is -trace: every policy on the trace window at every load (with
// the one-engine references and the miss decomposition) into
// routesim-trace.md and .json, or, with -peer-stat-seeds, kvroute against
// the peers over seeds into routesim-trace-peers.md and .json.
func runTrace(ctx context.Context, o options, base sim.Config, loads []float64, policies []sim.Policy, args []string, stdout io.Writer) error {
	w, err := loadTrace(o.trace)
	if err != nil {
		return err
	}
	base.Workload = w
	if err := base.Validate(); err != nil {
		return err
	}
	if o.peerSeeds != 0 {
		return runPeersInto(ctx, o, base, []sim.Workload{w}, loads, args, stdout, "routesim-trace-peers", sim.TracePreamble(base))
	}
	start := time.Now()
	results, err := sim.Sweep(ctx, base, []sim.Workload{w}, loads, policies, o.parallel)
	if err != nil {
		return err
	}
	meta := sim.Meta{
		Command:   strings.TrimSpace("go run ./bench/cmd/routesim " + strings.Join(args, " ")),
		Generated: time.Now(), Wall: time.Since(start), Base: base, Workloads: []sim.Workload{w}, Loads: loads,
		SVG: map[sim.WorkloadKind]string{sim.Trace: "routesim-trace.svg"}, Preamble: sim.TracePreamble(base),
	}
	if err := writeFile(filepath.Join(o.out, "routesim-trace.svg"), func(f io.Writer) error { return sim.WriteSVG(f, sim.Trace, results) }); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(o.out, "routesim-trace.md"), func(f io.Writer) error { return sim.WriteMarkdown(f, meta, results) }); err != nil {
		return err
	}
	err = writeFile(filepath.Join(o.out, "routesim-trace.json"), func(f io.Writer) error {
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"base": base, "trace": w.Trace, "traceStats": w.Trace.Stats(), "results": results})
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "routesim: %d trace runs in %v; wrote %s\n", len(results), meta.Wall.Round(time.Millisecond), filepath.Join(o.out, "routesim-trace.md"))
	printTargets(stdout, results)
	return nil
}
