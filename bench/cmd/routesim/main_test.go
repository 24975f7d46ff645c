package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/bench/internal/outdir"
	"github.com/kvroute/kvroute/bench/internal/sim"
)

// TestRoutesimWritesReport runs a tiny sweep end to end and checks the
// files it writes.
func TestRoutesimWritesReport(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-requests", "40", "-engines", "2", "-loads", "0.5,1",
		"-workloads", "shared-prefix,no-reuse", "-out", dir, "-parallel", "2"}, &out)
	require.NoError(t, err)
	require.Contains(t, out.String(), "shared-prefix load 1.00: kvroute hit")
	require.Contains(t, out.String(), "best peer")
	require.Contains(t, out.String(), "one engine")
	md, err := os.ReadFile(filepath.Join(dir, "routesim.md"))
	require.NoError(t, err)
	for _, want := range []string{"# Routing-quality simulation", "## shared-prefix", "## no-reuse",
		"routesim-shared-prefix.svg", "## Sensitivity: a single gateway replica", "## Where kvroute's misses go",
		"## Sensitivity: where kvroute's misses go with a single gateway replica"} {
		require.Contains(t, string(md), want)
	}
	for _, f := range []string{"routesim-shared-prefix.svg", "routesim-no-reuse.svg"} {
		svg, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(svg), "<svg"), f)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "routesim.json"))
	require.NoError(t, err)
	var parsed struct {
		Results       []map[string]any `json:"results"`
		SingleReplica []map[string]any `json:"singleReplica"`
	}
	require.NoError(t, json.Unmarshal(raw, &parsed))
	n := len(sim.AllPolicies)
	require.Len(t, parsed.Results, 2*2*n)
	require.Len(t, parsed.SingleReplica, 2*4, "kvroute, dynamo, sglang and approximate with one replica")
}

// TestDefaultOutputIsIgnored: without -out the command writes under the
// module root's out/ directory, which .gitignore ignores.
func TestDefaultOutputIsIgnored(t *testing.T) {
	dir, err := outdir.Resolve("", DefaultOut)
	require.NoError(t, err)
	root, err := outdir.ModuleRoot()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "out", "routesim"), dir)
	ignore, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	require.NoError(t, err)
	require.Contains(t, strings.Split(string(ignore), "\n"), "/out/")
	dir, err = outdir.Resolve("x/y", DefaultOut)
	require.NoError(t, err)
	require.Equal(t, "x/y", dir)
}

func TestRoutesimRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-loads", "0"}, {"-loads", "x"}, {"-policies", "random"}, {"-workloads", "bursty"}, {"stray"}, {"-requests", "0"}, {"-load-tie-tolerance", "-1"},
	} {
		err := run(context.Background(), append(args, "-out", t.TempDir()), &bytes.Buffer{})
		require.Error(t, err, "%v", args)
	}
}

// A tiny sweep: two engines, one workload, one load. The report's first
// line and the chart files are deterministic; the timings in it are not.
func Example() {
	dir, err := os.MkdirTemp("", "routesim")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	err = run(context.Background(), []string{"-requests", "24", "-engines", "2", "-loads", "0.5",
		"-workloads", "shared-prefix", "-sensitivity=false", "-out", dir}, io.Discard)
	if err != nil {
		panic(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "routesim.md"))
	fmt.Println(strings.SplitN(string(md), "\n", 2)[0])
	files, _ := filepath.Glob(filepath.Join(dir, "routesim*"))
	for _, f := range files {
		fmt.Println(filepath.Base(f))
	}
	// Output:
	// # Routing-quality simulation
	// routesim-shared-prefix.svg
	// routesim.json
	// routesim.md
}

// TestRoutesimRejectsInfiniteValues: an infinite load, rate, skew or
// capacity is refused by name before any run. A Zipf exponent of +Inf made
// the LoRA study's adapter draw loop forever.
func TestRoutesimRejectsInfiniteValues(t *testing.T) {
	for _, args := range [][]string{
		{"-loads", "inf", "-requests", "40"},
		{"-session", "-session-loads", "inf", "-session-requests", "40"},
		{"-pd", "-pd-loads", "+Inf", "-pd-requests", "40", "-pd-sweep=false"},
		{"-overload", "-overload-loads", "inf", "-overload-requests", "40"},
		{"-overload", "-overload-capacity", "inf", "-overload-requests", "40"},
		{"-lora", "-lora-rates", "inf", "-lora-requests", "40"},
		{"-lora", "-lora-zipf", "inf", "-lora-requests", "40", "-lora-rates", "10"},
	} {
		err := run(context.Background(), append(args, "-out", t.TempDir()), &bytes.Buffer{})
		require.Error(t, err, "%v", args)
	}
}
