package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvroute/kvroute/bench/internal/sim"
)

// runPeersOnly is -peer-stat-seeds N: kvroute and the peers' policies on
// every workload at the loads of at least half capacity, over traffic seeds
// 1..N, in their own files.
func runPeersOnly(ctx context.Context, o options, base sim.Config, workloads []sim.Workload, loads []float64, args []string, stdout io.Writer) error {
	return runPeersInto(ctx, o, base, workloads, loads, args, stdout, "routesim-peers", "")
}

// runPeersInto is runPeersOnly writing <name>.md and <name>.json, with an
// optional paragraph (a trace run's description) after the header.
func runPeersInto(ctx context.Context, o options, base sim.Config, workloads []sim.Workload, loads []float64, args []string, stdout io.Writer, name, preamble string) error {
	if o.peerSeeds < 0 {
		return fmt.Errorf("bad -peer-stat-seeds %d", o.peerSeeds)
	}
	start := time.Now()
	var at []float64
	for _, l := range loads {
		if l >= sim.HalfCapacity {
			at = append(at, l)
		}
	}
	if len(at) == 0 {
		return fmt.Errorf("-peer-stat-seeds: no load ≥ %.1f", sim.HalfCapacity)
	}
	seeds := make([]uint64, o.peerSeeds)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	known, reused, err := loadPeerRuns(o.peerReuse, o.peerReusePolicies)
	if err != nil {
		return err
	}
	rows, err := sim.PeerSeedSweepKnown(ctx, base, workloads, at, seeds, known, o.parallel)
	if err != nil {
		return err
	}
	met, total := 0, 0
	err = writeFile(filepath.Join(o.out, name+".md"), func(f io.Writer) error {
		fmt.Fprintf(f, "# kvroute against the peers over seeds (%s)\n\nGenerated %s in %v of host time. Each run is deterministic; see routesim.md for the fleet, the policies and the workloads.\n",
			strings.TrimSpace("go run ./bench/cmd/routesim "+strings.Join(args, " ")),
			time.Now().UTC().Format(time.RFC3339), time.Since(start).Round(time.Second))
		if preamble != "" {
			fmt.Fprintf(f, "\n%s\n", preamble)
		}
		if reused != "" {
			fmt.Fprintf(f, "\n%s\n", reused)
		}
		var err error
		met, total, err = sim.WritePeerSeedTable(f, rows)
		return err
	})
	if err != nil {
		return err
	}
	err = writeFile(filepath.Join(o.out, name+".json"), func(f io.Writer) error {
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"base": base, "overSeeds": rows})
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "routesim: %d rows over %d seeds in %v, %d of %d meet the target over seeds; wrote %s\n", len(rows), len(seeds),
		time.Since(start).Round(time.Millisecond), met, total, filepath.Join(o.out, name+".md"))
	return nil
}

// loadPeerRuns reads -peer-stat-reuse: the per-seed TTFT p90s of the given
// policies from an earlier routesim-peers.json, and a sentence for the
// report saying which runs were taken from where. None without a file.
func loadPeerRuns(path, policies string) (map[sim.PeerRun]time.Duration, string, error) {
	if path == "" {
		return nil, "", nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var prev struct {
		OverSeeds []sim.PeerSeedRow `json:"overSeeds"`
	}
	if err := json.Unmarshal(raw, &prev); err != nil {
		return nil, "", fmt.Errorf("-peer-stat-reuse %s: %w", path, err)
	}
	want := map[sim.Policy]bool{}
	for _, name := range splitList(policies) {
		p, err := sim.ParsePolicy(name)
		if err != nil {
			return nil, "", err
		}
		want[p] = true
	}
	known := map[sim.PeerRun]time.Duration{}
	for _, r := range prev.OverSeeds {
		for p, ds := range r.TTFTP90 {
			if !want[p] || len(ds) != len(r.Seeds) {
				continue
			}
			for i, s := range r.Seeds {
				known[sim.PeerRun{Workload: r.Workload, Load: r.Load, Policy: p, Seed: s}] = ds[i]
			}
		}
	}
	return known, fmt.Sprintf("The runs of %s were taken from %s (%d runs; the simulation is deterministic and those policies' code had not changed since), the others were run.",
		policies, filepath.Base(path), len(known)), nil
}
