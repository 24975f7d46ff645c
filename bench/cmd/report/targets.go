package main

import (
	"fmt"
	"math"
)

// Target is one of kvroute's design performance targets, tied to
// the benchmark and metric that measure it.
type Target struct {
	What      string  // the design's wording
	Bench     string  // benchmark name
	Unit      string  // metric compared
	Max       bool    // true: the figure must be at most Limit; false: at least
	Limit     float64 // in Unit
	ZeroAlloc bool    // also requires 0 allocs/op
	Display   string  // the target as the design states it
	Existing  string  // "best existing Go implementation, same machine class"
}

// Targets are the design's performance targets.
var Targets = []Target{
	{What: "Match of a 2,048-token prompt (32 blocks of 64) against 64 candidates, warm index of ≥ 1M blocks",
		Bench: "Match/tokens=2048/endpoints=64", Unit: "ns/op", Max: true, Limit: 2000, ZeroAlloc: true,
		Display: "≤ 2 µs, 0 allocs/op", Existing: "785 µs for 128 blocks × 8 pods"},
	{What: "block keys of 2,048 tokens", Bench: "Keys/tokens=2048", Unit: "ns/op", Max: true, Limit: 1000,
		Display: "≤ 1 µs", Existing: "11.5 µs (xxh64), 87 µs (CBOR-FNV)"},
	{What: "decode + apply of BlockStored events (16 blocks × 64 tokens)", Bench: "Apply/blocks=16", Unit: "blocks/s",
		Limit: 1_000_000, Display: "≥ 1,000,000 blocks/s on one core", Existing: "~220,000 blocks/s"},
	{What: "memory per (block, endpoint) membership, engine-hash map included", Bench: "Memory", Unit: "bytes/membership",
		Max: true, Limit: 100, Display: "≤ 100 bytes", Existing: "~1,300 bytes per block"},
	{What: "full Pick (keys + match + filter + score) for 2,048 tokens, 64 endpoints, render excluded",
		Bench: "Pick/tokens=2048/endpoints=64", Unit: "ns/op", Max: true, Limit: 10_000,
		Display: "≤ 10 µs", Existing: "ms range"},
}

// Verdict says whether b meets t, and formats the measured figure.
func (t Target) Verdict(b Bench) (measured string, met bool, ok bool) {
	v, ok := b.Metrics[t.Unit]
	if !ok {
		return "", false, false
	}
	met = v >= t.Limit
	if t.Max {
		met = v <= t.Limit
	}
	measured = formatMetric(v, t.Unit)
	if t.ZeroAlloc {
		allocs := b.Metrics["allocs/op"]
		measured += fmt.Sprintf(", %s allocs/op", formatNumber(allocs))
		met = met && allocs == 0
	}
	return measured, met, true
}

// formatMetric renders a value in its unit, times as ns/µs/ms.
func formatMetric(v float64, unit string) string {
	if unit == "ns/op" {
		switch {
		case v >= 1e6:
			return fmt.Sprintf("%.2f ms", v/1e6)
		case v >= 1e3:
			return fmt.Sprintf("%.2f µs", v/1e3)
		default:
			return fmt.Sprintf("%.0f ns", v)
		}
	}
	return formatNumber(v) + " " + unit
}

// formatNumber prints v with thousands separators when large and three
// significant figures when small.
func formatNumber(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return group(fmt.Sprintf("%.0f", v))
	case math.Abs(v) >= 1000:
		return group(fmt.Sprintf("%.0f", v))
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func group(s string) string {
	neg := s != "" && s[0] == '-'
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// Ratio is a target stated against a floor benchmark measured in the same
// run: BenchmarkRatio interleaves the operation and its floor and reports
// the median per-batch ratio as x-floor; the separate headline and Floor
// benchmarks give a second, sequential ratio.
type Ratio struct {
	What      string  // the operation
	Bench     string  // the interleaved benchmark (reports x-floor)
	Headline  string  // the headline benchmark of the operation ("": none, no sequential ratio)
	Floor     string  // the floor benchmark
	Limit     float64 // at most this many times the floor
	ZeroAlloc bool    // the headline benchmark (without one, the interleaved one) must not allocate
}

// Ratios are the floor-relative targets.
var Ratios = []Ratio{
	{What: "Match, 2,048 tokens, 64 candidates vs 32 lookups in a 1M-entry Go map of endpoint masks",
		Bench: "Ratio/Match/tokens=2048/endpoints=64", Headline: "Match/tokens=2048/endpoints=64", Floor: "FloorMatch", Limit: 1.3, ZeroAlloc: true},
	{What: "the same Match where every block is held by four of the 64 endpoints (2²⁰ blocks, 2²² memberships) vs the same floor",
		Bench: "Ratio/Match/tokens=2048/endpoints=64,holders=4", Limit: 1.3, ZeroAlloc: true},
	{What: "the same with 3 × 2¹⁹ shared blocks vs the floor over as many entries",
		Bench: "Ratio/Match/tokens=2048/endpoints=64,holders=4,blocks=1572864", Limit: 1.3, ZeroAlloc: true},
	{What: "the same with the prompt's blocks stored before all the others (the index's oldest blocks)",
		Bench: "Ratio/Match/tokens=2048/endpoints=64,holders=4,blocks=1572864,oldest", Limit: 1.3, ZeroAlloc: true},
	{What: "Keys of 2,048 tokens vs one XXH64 pass over their 8 KiB",
		Bench: "Ratio/Keys/tokens=2048", Headline: "Keys/tokens=2048", Floor: "FloorHash", Limit: 1.2, ZeroAlloc: true},
	{What: "full Pick of 2,048 tokens among 64 endpoints, render excluded, Decision released, vs its own Keys + Match of the same prompt and candidates",
		Bench: "Ratio/Pick/tokens=2048/endpoints=64", Limit: 3, ZeroAlloc: true},
	{What: "decode + apply of 16 blocks vs per block: 64 msgpack ints decoded, one XXH64 of 256 bytes, one insert into a 1M-entry map",
		Bench: "Ratio/Apply/blocks=16", Headline: "Apply/blocks=16", Floor: "FloorApply", Limit: 2},
}

// Verdict returns the interleaved ratio (x-floor of r.Bench), the
// sequential one (headline ns/op over floor ns/op; 0 when either is
// missing), and whether the interleaved ratio meets the limit.
func (r Ratio) Verdict(o *Output) (interleaved, sequential float64, met, ok bool) {
	b, found := o.Find(r.Bench)
	if !found {
		return 0, 0, false, false
	}
	interleaved, ok = b.Metrics["x-floor"]
	if r.Headline == "" && r.ZeroAlloc && b.Metrics["allocs/op"] != 0 {
		return interleaved, 0, false, ok
	}
	if h, hok := o.Find(r.Headline); hok {
		if f, fok := o.Find(r.Floor); fok && f.Metrics["ns/op"] > 0 {
			sequential = h.Metrics["ns/op"] / f.Metrics["ns/op"]
		}
		if r.ZeroAlloc && h.Metrics["allocs/op"] != 0 {
			return interleaved, sequential, false, ok
		}
	}
	return interleaved, sequential, ok && interleaved <= r.Limit, ok
}
