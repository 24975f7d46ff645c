package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// domainUnits are the metrics shown in the "domain metric" column, in
// order of preference.
var domainUnits = []string{"x-floor", "floor-ns/op", "lookup-ns/op", "p50-ns", "p99-ns", "p99.9-ns", "p99/p50", "gc-cpu-%", "gc-pause-ms", "ingest-blocks/s", "ns/block", "blocks/s", "msgs/s", "bytes/membership", "bytes/block", "tokens/s", "ns/endpoint", "memberships", "MB/s"}

// Write renders RESULTS.md.
func Write(w io.Writer, env Env, o *Output, raw []byte) {
	var b strings.Builder
	b.WriteString("# kvroute benchmark results\n\n")
	fmt.Fprintf(&b, "Produced by `go run ./bench/cmd/report` on %s. Regenerate with the same command; figures vary with the machine and its load.\n\n",
		env.Date.Format("2006-01-02 15:04 UTC"))
	if env.Note != "" {
		fmt.Fprintf(&b, "> **Note:** %s\n\n", env.Note)
	}
	if shared, msg := loaded(env); shared {
		fmt.Fprintf(&b, "> **The machine was shared while this ran** (%s). Every figure below is pessimistic: other processes competed for the same cores.\n\n", msg)
	}
	b.WriteString("| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| CPU | %s (%d logical CPUs) |\n", env.CPU, env.NumCPU)
	fmt.Fprintf(&b, "| GOMAXPROCS | %s |\n", env.GOMAXPROCS)
	fmt.Fprintf(&b, "| Go | %s %s |\n", env.GoVersion, env.OSArch)
	fmt.Fprintf(&b, "| Command | `%s` |\n", env.Command)
	if env.LoadBefore != "" {
		fmt.Fprintf(&b, "| Load average (1 min) | %s before, %s after |\n", env.LoadBefore, env.LoadAfter)
	}
	b.WriteString("\n## Against the design's targets\n\n")
	b.WriteString("Targets and reference figures are kvroute's design targets (bench/cmd/report/targets.go); the reference column is the design's best existing Go implementation on the same machine class, not measured here.\n\n")
	b.WriteString("| what | benchmark | measured | target | met? | best existing Go implementation |\n|---|---|---:|---|:---:|---|\n")
	for _, t := range Targets {
		bench, ok := o.Find(t.Bench)
		measured, met, have := t.Verdict(bench)
		if !ok || !have {
			fmt.Fprintf(&b, "| %s | `%s` | not run | %s | — | %s |\n", t.What, t.Bench, t.Display, t.Existing)
			continue
		}
		v := "yes"
		if !met {
			v = "**no**"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s | %s |\n", t.What, t.Bench, measured, t.Display, v, t.Existing)
	}
	if slices.ContainsFunc(Ratios, func(r Ratio) bool { _, ok := o.Find(r.Bench); return ok }) {
		b.WriteString("\n## Against floors measured in the same run\n\n")
		b.WriteString("Each operation against the least work that could produce its answer (`bench/floor_test.go`). `BenchmarkRatio` runs the two in alternating batches of 64, so both see the same load; the sequential column divides the separate headline and floor benchmarks' medians.\n\n")
		b.WriteString("| operation | interleaved (x floor) | sequential (x floor) | target | met? |\n|---|---:|---:|---:|:---:|\n")
		for _, r := range Ratios {
			il, sq, met, ok := r.Verdict(o)
			if !ok {
				fmt.Fprintf(&b, "| %s | not run | | ≤ %.1f× | — |\n", r.What, r.Limit)
				continue
			}
			seq := "—"
			if sq > 0 {
				seq = fmt.Sprintf("%.2f×", sq)
			}
			v := "yes"
			if !met {
				v = "**no**"
			}
			fmt.Fprintf(&b, "| %s | %.2f× | %s | ≤ %.1f× | %s |\n", r.What, il, seq, r.Limit, v)
		}
	}
	b.WriteString("\n## Headline benchmarks\n\n")
	runs := 0
	for _, bench := range o.Benches {
		runs = max(runs, bench.Runs)
	}
	fmt.Fprintf(&b, "Median of %d run(s) each.\n\n", runs)
	writeTable(&b, o, func(name string) bool { return !isScale(name) })
	if slices.ContainsFunc(o.Benches, func(x Bench) bool { return isScale(x.Name) }) {
		b.WriteString("\n## Scaling\n\n")
		b.WriteString("Lookup cost (one Match of a 2,048-token prompt) as the index grows from 10⁴ to 10⁷ (block, endpoint) memberships with 64 candidates, and as the candidates grow from 8 to 1,024 endpoints (each holding a prefix of the prompt) in an index of 2²⁰ background blocks.\n\n")
		b.WriteString("`MatchUnderIngest` times each Match (p50/p99/p99.9) at 10⁶ and 10⁷ memberships while one goroutine stores events at full speed on capped endpoints and the GC is forced every 100 ms; gc-cpu-% is the GC's share of all CPU time (runtime/metrics) during the timed loop.\n\n")
		writeTable(&b, o, isScale)
	}
	b.WriteString("\n## Raw output\n\n<details><summary>go test output</summary>\n\n```\n")
	b.WriteString(strings.TrimSpace(string(raw)))
	b.WriteString("\n```\n\n</details>\n")
	_, _ = io.WriteString(w, b.String())
}

// isScale reports whether a benchmark belongs in the scaling section.
func isScale(name string) bool {
	return strings.HasPrefix(name, "Scale") || strings.HasPrefix(name, "MatchUnderIngest")
}

func writeTable(b *strings.Builder, o *Output, keep func(string) bool) {
	b.WriteString("| benchmark | time/op | domain metrics | B/op | allocs/op |\n|---|---:|---|---:|---:|\n")
	for _, bench := range o.Benches {
		if !keep(bench.Name) {
			continue
		}
		var dom []string
		for _, u := range domainUnits {
			if v, ok := bench.Metrics[u]; ok {
				dom = append(dom, formatNumber(v)+" "+u)
			}
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", bench.Name, formatMetric(bench.Metrics["ns/op"], "ns/op"),
			strings.Join(dom, ", "), formatNumber(bench.Metrics["B/op"]), formatNumber(bench.Metrics["allocs/op"]))
	}
}

// loaded reports whether the load average suggests a shared machine: above
// half the CPU count before or after the run.
func loaded(env Env) (bool, string) {
	for _, s := range []string{env.LoadBefore, env.LoadAfter} {
		if v, err := strconv.ParseFloat(s, 64); err == nil && v > float64(env.NumCPU)/2 {
			return true, fmt.Sprintf("1-minute load average %s before and %s after the run, on %d CPUs", env.LoadBefore, env.LoadAfter, env.NumCPU)
		}
	}
	return false, ""
}
