package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseMergesRunsIntoMedians(t *testing.T) {
	f, err := os.Open("testdata/bench.txt")
	require.NoError(t, err)
	defer f.Close()
	o, err := Parse(f)
	require.NoError(t, err)
	require.False(t, o.Failed)
	require.Equal(t, "Intel(R) Xeon(R) Processor", o.CPU)
	require.Equal(t, "linux", o.GOOS)
	require.Len(t, o.Benches, 9)
	apply, ok := o.Find("Apply/blocks=16")
	require.True(t, ok)
	require.Equal(t, 3, apply.Runs)
	require.Equal(t, 2, apply.Procs)
	require.Equal(t, 1242460.0, apply.Metrics["blocks/s"], "median of three")
	require.Equal(t, 12878.0, apply.Metrics["ns/op"])
	m, ok := o.Find("Match/tokens=32768/endpoints=256")
	require.True(t, ok)
	require.Equal(t, 378.4, m.Metrics["ns/block"])
	_, ok = o.Find("Nope")
	require.False(t, ok)
}

// ratioOf returns the target of the interleaved benchmark bench.
func ratioOf(t *testing.T, bench string) Ratio {
	t.Helper()
	for _, r := range Ratios {
		if r.Bench == bench {
			return r
		}
	}
	t.Fatalf("no ratio target for %s", bench)
	return Ratio{}
}

func TestRatiosVerdicts(t *testing.T) {
	out := "BenchmarkRatio/Keys/tokens=2048-2 10 900 ns/op 800 floor-ns/op 1.125 x-floor 0 B/op 0 allocs/op\n" +
		"BenchmarkKeys/tokens=2048-2 10 1000 ns/op 0 B/op 0 allocs/op\n" +
		"BenchmarkFloorHash-2 10 800 ns/op 0 B/op 0 allocs/op\n" +
		"BenchmarkRatio/Match/tokens=2048/endpoints=64-2 10 900 ns/op 300 floor-ns/op 3 x-floor 0 B/op 0 allocs/op\n"
	o, err := Parse(strings.NewReader(out))
	require.NoError(t, err)
	keys, match, apply := ratioOf(t, "Ratio/Keys/tokens=2048"), Ratios[0], ratioOf(t, "Ratio/Apply/blocks=16")
	il, sq, met, ok := keys.Verdict(o)
	require.True(t, ok)
	require.True(t, met)
	require.Equal(t, 1.125, il)
	require.Equal(t, 1.25, sq)
	_, sq, met, ok = match.Verdict(o)
	require.True(t, ok)
	require.False(t, met, "3× is above 1.3×")
	require.Zero(t, sq, "no headline run")
	_, _, _, ok = apply.Verdict(o)
	require.False(t, ok)
	var md bytes.Buffer
	Write(&md, Env{NumCPU: 2}, o, []byte(out))
	require.Contains(t, md.String(), "| 1.12× | 1.25× | ≤ 1.2× | yes |")
}

// TestRatiosShared checks the shared-blocks Match row: its name (a comma
// in the last element) parses with its GOMAXPROCS suffix, it has no
// sequential ratio, and its own allocations fail the zero-alloc target.
func TestRatiosShared(t *testing.T) {
	shared := Ratios[1]
	require.Equal(t, "Ratio/Match/tokens=2048/endpoints=64,holders=4", shared.Bench)
	line := "BenchmarkRatio/Match/tokens=2048/endpoints=64,holders=4-2 \t 200000 \t 480 ns/op \t 370 floor-ns/op \t 1.28 x-floor \t 0 B/op \t %d allocs/op\n"
	o, err := Parse(strings.NewReader(fmt.Sprintf(line, 0)))
	require.NoError(t, err)
	b, ok := o.Find(shared.Bench)
	require.True(t, ok)
	require.Equal(t, 2, b.Procs)
	il, sq, met, ok := shared.Verdict(o)
	require.True(t, ok)
	require.True(t, met)
	require.Equal(t, 1.28, il)
	require.Zero(t, sq, "no headline benchmark")
	var md bytes.Buffer
	Write(&md, Env{NumCPU: 2}, o, nil)
	require.Contains(t, md.String(), "| "+shared.What+" | 1.28× | — | ≤ 1.3× | yes |")

	o, err = Parse(strings.NewReader(fmt.Sprintf(line, 1)))
	require.NoError(t, err)
	_, _, met, ok = shared.Verdict(o)
	require.True(t, ok)
	require.False(t, met, "1 alloc/op misses the zero-alloc target")
}

func TestParseEdgeCases(t *testing.T) {
	o, err := Parse(strings.NewReader("BenchmarkX 12 3 ns/op 4 B/op\nBenchmarkY-8 1 2\nBenchmarkZ-4 x 1 ns/op\nBenchmarkW-4 1 y ns/op\n--- FAIL: BenchmarkV\n"))
	require.NoError(t, err)
	require.True(t, o.Failed)
	require.Len(t, o.Benches, 1)
	require.Equal(t, "X", o.Benches[0].Name)
	require.Equal(t, 1, o.Benches[0].Procs)
	require.Equal(t, 2.0, median([]float64{1, 3}))
}

func TestTargetsVerdicts(t *testing.T) {
	byBench := map[string]Target{}
	for _, tg := range Targets {
		byBench[tg.Bench] = tg
	}
	match := byBench["Match/tokens=2048/endpoints=64"]
	m, met, ok := match.Verdict(Bench{Metrics: map[string]float64{"ns/op": 1814, "allocs/op": 0}})
	require.True(t, ok)
	require.True(t, met)
	require.Equal(t, "1.81 µs, 0 allocs/op", m)
	_, met, _ = match.Verdict(Bench{Metrics: map[string]float64{"ns/op": 1814, "allocs/op": 1}})
	require.False(t, met, "an allocation fails the zero-alloc target")
	apply := byBench["Apply/blocks=16"]
	m, met, _ = apply.Verdict(Bench{Metrics: map[string]float64{"blocks/s": 999_999}})
	require.False(t, met)
	require.Equal(t, "999,999 blocks/s", m)
	_, _, ok = apply.Verdict(Bench{Metrics: map[string]float64{}})
	require.False(t, ok)
	require.Equal(t, "83.1", formatNumber(83.07))
	require.Equal(t, "-1,234", formatNumber(-1234))
	require.Equal(t, "1.23 ms", formatMetric(1.234e6, "ns/op"))
	require.Equal(t, "512 ns", formatMetric(512, "ns/op"))
}

// TestReportFromSavedOutput runs the command on a saved output and checks
// the file it writes.
func TestReportFromSavedOutput(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	out := filepath.Join(dir, "RESULTS.md")
	var stdout bytes.Buffer
	err := run(context.Background(), []string{"-from", "testdata/bench.txt", "-out", dir, "-note", "test run"}, &stdout, &bytes.Buffer{})
	require.NoError(t, err)
	require.Contains(t, stdout.String(), "Keys/tokens=2048")
	require.Contains(t, stdout.String(), "NOT met")
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	md := string(data)
	for _, want := range []string{
		"# kvroute benchmark results", "> **Note:** test run", "| CPU | Intel(R) Xeon(R) Processor",
		"| `Match/tokens=2048/endpoints=64` | 1.81 µs, 0 allocs/op | ≤ 2 µs, 0 allocs/op | yes | 785 µs",
		"| `Keys/tokens=2048` | 1.31 µs | ≤ 1 µs | **no** |",
		"1,242,460 blocks/s", "## Scaling", "| Command | `go test -run '^$' -bench ", "`ScaleEndpoints/endpoints=8`", "<details>",
	} {
		require.Contains(t, md, want)
	}
}

func TestReportRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.txt")
	require.NoError(t, os.WriteFile(empty, []byte("PASS\n"), 0o644))
	failed := filepath.Join(dir, "failed.txt")
	require.NoError(t, os.WriteFile(failed, []byte("BenchmarkX-2 1 1 ns/op\nFAIL\n"), 0o644))
	for _, args := range [][]string{
		{"-from", empty}, {"-from", failed}, {"-from", filepath.Join(dir, "missing")}, {"-count", "0"}, {"stray"},
	} {
		err := run(context.Background(), append(args, "-out", dir), &bytes.Buffer{}, &bytes.Buffer{})
		require.Error(t, err, "%v", args)
	}
}

func TestLoadedMachineIsFlagged(t *testing.T) {
	shared, msg := loaded(Env{NumCPU: 2, LoadBefore: "3.5", LoadAfter: "0.2"})
	require.True(t, shared)
	require.Contains(t, msg, "3.5 before")
	shared, _ = loaded(Env{NumCPU: 8, LoadBefore: "0.5", LoadAfter: "1.0"})
	require.False(t, shared)
	var b bytes.Buffer
	Write(&b, Env{Date: time.Unix(0, 0).UTC(), NumCPU: 2, LoadBefore: "4", LoadAfter: "4", CPU: "x"}, &Output{}, nil)
	require.Contains(t, b.String(), "The machine was shared")
}

// Parse a line of benchmark output and compare it with its target.
func Example() {
	o, err := Parse(strings.NewReader(
		"BenchmarkPick/tokens=2048/endpoints=64-2   37130   6962 ns/op   217.6 ns/block   144 B/op   1 allocs/op\n"))
	if err != nil {
		panic(err)
	}
	for _, t := range Targets {
		if b, ok := o.Find(t.Bench); ok {
			m, met, _ := t.Verdict(b)
			fmt.Printf("%s: %s (target %s, met: %v)\n", t.Bench, m, t.Display, met)
		}
	}
	// Output:
	// Pick/tokens=2048/endpoints=64: 6.96 µs (target ≤ 10 µs, met: true)
}
