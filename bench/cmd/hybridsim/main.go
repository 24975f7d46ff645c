package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kvroute/kvroute/bench/internal/sim"
	"github.com/kvroute/kvroute/internal/cliflag"
	"github.com/kvroute/kvroute/simengine"
)

func main() {
	cliflag.Exit("hybridsim", run(context.Background(), os.Args[1:], os.Stdout))
}

func run(_ context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("hybridsim", flag.ContinueOnError)
	requests := fs.Int("requests", 1500, "requests per run")
	load := fs.Float64("load", 0.75, "load (fraction of the fleet's prefill capacity)")
	window := fs.Int("window", 1024, "sliding window in tokens")
	pools := fs.String("pools", "4096,2048,1024", "comma-separated block pool sizes per engine (numGPUBlocks), which full attention, the window and the Mamba group share")
	mamba := fs.Bool("mamba", true, "give the engines a Mamba group beside the window group")
	seed := fs.Uint64("seed", 1, "random seed")
	out := fs.String("out", "", "write the Markdown report here (default stdout)")
	if err := cliflag.Parse(fs, args, stdout); err != nil {
		return err
	}
	cfg := sim.DefaultConfig(sim.SharedPrefix, *load)
	cfg.Seed = *seed
	cfg.Workload.Requests = *requests
	var b strings.Builder
	fmt.Fprintf(&b, "# Hybrid-attention model: predicted vs served cached tokens\n\n")
	fmt.Fprintf(&b, "Command: `go run ./bench/cmd/hybridsim %s`\n\n", strings.Join(args, " "))
	groups := "a sliding-window group"
	if *mamba {
		groups += " and a Mamba group"
	}
	fmt.Fprintf(&b, "Shared-prefix workload, %d requests, load %.2f, %d engines, blocks of %d tokens, full attention with %s, sliding window %d tokens, "+
		"every group allocating from the engine's one block pool, as vLLM's do. "+
		"Per request routed by kvroute: predicted = the index's contiguous cached tokens on the chosen endpoint "+
		"(capped like the engine's hit), served = the engine's prefix-cache hit. \"before\" drops the window and Mamba "+
		"groups' events before the index (kvroute indexing full attention only); \"after\" indexes every group.\n\n",
		*requests, *load, cfg.Fleet.Engines, cfg.Fleet.BlockSize, groups, *window)
	fmt.Fprintf(&b, "| pool blocks | index | requests | mean abs error (tokens) | error / prompt tokens | over-predicted | under-predicted | predicted / served tokens | hit rate | TTFT p90 |\n")
	fmt.Fprintf(&b, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, pool := range strings.Split(*pools, ",") {
		var n int
		if _, err := fmt.Sscanf(pool, "%d", &n); err != nil || n < 1 {
			return fmt.Errorf("hybridsim: -pools entry %q: want a number of blocks, e.g. 1024", pool)
		}
		cfg.Fleet.NumGPUBlocks = n
		cfg.Fleet.Hybrid = &simengine.HybridConfig{SlidingWindow: *window, Mamba: *mamba}
		for _, ignore := range []bool{true, false} {
			c := cfg
			c.IgnoreCacheGroups = ignore
			res, err := sim.Run(c, sim.KVRoute)
			if err != nil {
				return err
			}
			e := res.CacheError
			if e == nil {
				return fmt.Errorf("hybridsim: no request measured")
			}
			name := "full attention only (before)"
			if !ignore {
				name = "every cache group (after)"
			}
			fmt.Fprintf(&b, "| %d | %s | %d | %.1f | %.4f | %d | %d | %.3f | %.3f | %v |\n", n, name, e.Requests, e.MeanAbsTokens,
				e.RelError, e.Over, e.Under, float64(e.Predicted)/float64(max(e.Served, 1)), res.HitRate, res.TTFTP90.Round(1e6))
		}
	}
	if *out == "" {
		_, err := io.WriteString(stdout, b.String())
		return err
	}
	return os.WriteFile(*out, []byte(b.String()), 0o644)
}
