package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// runEnv describes the machine and its load around a run.
type runEnv struct {
	Start      time.Time
	CPU        string
	NumCPU     int
	GOMAXPROCS int
	Go         string
	LoadBefore string
	LoadAfter  string
}

func captureEnv() *runEnv {
	e := &runEnv{Start: time.Now().UTC(), NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH, LoadBefore: loadAvg(), CPU: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				e.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return e
}

func (e *runEnv) finish() { e.LoadAfter = loadAvg() }

// loadAvg returns the 1-minute load average from /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// loaded reports whether a 1-minute load average is above half the CPUs.
func (e *runEnv) loaded() bool {
	var a, b float64
	fmt.Sscan(e.LoadBefore, &a)
	fmt.Sscan(e.LoadAfter, &b)
	return max(a, b) > float64(e.NumCPU)/2
}

func (e *runEnv) header(b *strings.Builder, command string) {
	fmt.Fprintf(b, "Produced by `%s` on %s.\n\n", command, e.Start.Format("2006-01-02 15:04 UTC"))
	if e.loaded() {
		fmt.Fprintf(b, "> **The machine was shared while this ran** (1-minute load average %s before and %s after, on %d CPUs): other processes competed for the same cores, so absolute figures are pessimistic; compare rows of this one run.\n\n",
			e.LoadBefore, e.LoadAfter, e.NumCPU)
	}
	fmt.Fprintf(b, "| | |\n|---|---|\n| CPU | %s (%d logical CPUs) |\n| GOMAXPROCS | %d in every process |\n| Go | %s |\n| Load average (1 min) | %s before, %s after |\n\n",
		e.CPU, e.NumCPU, e.GOMAXPROCS, e.Go, e.LoadBefore, e.LoadAfter)
}

func renderReport(o options, e *runEnv, cells []cell) string {
	var b strings.Builder
	b.WriteString("# Gateway path under load\n\n")
	e.header(&b, "go run ./bench/cmd/gwload "+strings.Join(os.Args[1:], " "))
	fmt.Fprintf(&b, "Two simulated vLLM engines (`simengine`, steps ×0.001, KV events on), each in its own process; "+
		"the gateway (`gateway`) in another; the closed-loop load generator in this one. "+
		"Every request is a completions request with a %d-token shared prefix, a unique suffix and `max_tokens` 1. "+
		"`direct` spreads requests over the engines in turn; `precise` goes through the gateway with precise prefix-cache routing "+
		"(render on the engines, KV-event index); `precise-once` is `precise` with tokenize-once (the engines get the rendered token IDs, not the text); `round-robin` goes through the gateway without render or routing; `round-robin-exchange` is `round-robin` with one bodiless exchange with an engine (`GET /health`) before each request is proxied, the floor of any gateway that renders on the engines. "+
		"%v of load before each %v window; CPU is each process's user + system time over the window (/proc/<pid>/stat), divided by the requests completed in it. "+
		"New conns counts the TCP connections the engines accepted during the window: a pool growing toward a new peak of concurrent requests per engine, or churn; churn is what TIME_WAIT shows:  the change in sockets to the engines' ports in TIME_WAIT over the window, i.e. connections closed (machine-wide, so expiries of earlier ones can make it negative). Closed by client / engine counts the engines' connections closed in the window, exactly, by the side that closed first (client: the engine read the end of the connection before closing it). Before a cell that follows another target's the engines close the idle connections the cells before left, so that their keep-alive timeout does not close them in its window: the counts are the target's own.\n\n",
		o.prefixTokens, o.warmup, o.window)
	if o.attribute {
		b.WriteString("Gateway CPU excl. render is the gateway's CPU/req times the share of its CPU profile (of the same window) that is not render's. " +
			"Render's is every sample with a method of the render client (`render.(*Client)`) on its stack (preparing the body, the exchange, decoding the token IDs) " +
			"and every sample of the render connections' own goroutines, which a pprof goroutine label marks from the attempt that dials them. " +
			"GC work done by the background mark workers is neither, so it counts as the gateway's own, even the part render's allocations cause. " +
			"Alloc/req, objects/req and GC CPU/req are the gateway's runtime/metrics counters over the window.\n\n")
	}
	b.WriteString("| target | concurrency | round | requests/s | p50 | p99 | errors | gateway CPU/req | render share | gateway CPU/req excl. render | alloc/req | objects/req | GC CPU/req | engines CPU/req | load-gen CPU/req | new conns | TIME_WAIT Δ | closed by client / engine |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cells {
		gw, share, own, alloc, objs, gc := "—", "—", "—", "—", "—", "—"
		if c.Target != targetDirect {
			gw = fmt.Sprintf("%.3f ms", perReq(c.GatewayCPU, c.Res.Requests))
			if c.Res.Requests > 0 {
				n := float64(c.Res.Requests)
				alloc = fmt.Sprintf("%.1f KB", float64(c.Mem.AllocBytes)/n/1000)
				objs = fmt.Sprintf("%.0f", float64(c.Mem.Allocs)/n)
				gc = fmt.Sprintf("%.3f ms", c.Mem.GCCPU*1000/n)
			}
		}
		if c.RenderShare >= 0 {
			share = fmt.Sprintf("%.0f %%", 100*c.RenderShare)
			own = fmt.Sprintf("%.3f ms", perReq(c.GatewayCPU, c.Res.Requests)*(1-c.RenderShare))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %.2f ms | %.2f ms | %d | %s | %s | %s | %s | %s | %s | %.3f ms | %.3f ms | %d | %d | %d / %d |\n",
			c.Target, c.Conc, c.Round, c.Res.RPS(), ms(c.Res.P50), ms(c.Res.P99), c.Res.Errors, gw, share, own, alloc, objs, gc,
			perReq(c.EnginesCPU, c.Res.Requests), perReq(c.LoadGenCPU, c.Res.Requests), c.NewConns, c.TimeWaitNew, c.ClosedByClient, c.ClosedByEngine)
	}
	if o.baseline != "" {
		beforeAfter(&b, o, cells)
	}
	againstDirect(&b, o, cells)
	if o.baseline != "" {
		b.WriteString("\n`(baseline)` rows ran their gateway from `" + o.baseline + "`, a gwload binary built from an earlier revision, against the same engines and load generator in this run.\n")
	}
	if o.attribute {
		b.WriteString("\nEach gateway window's CPU profile is `gateway-<target>-c<concurrency>[-r<round>].pprof` beside this file (`go tool pprof -top` it; `-tagignore " + stageLabel + "=" + stageRender + " -ignore 'render\\.\\(\\*Client\\)'` leaves the gateway's own), " +
			"and its allocations are the difference of the `.allocs0.pb.gz` and `.allocs1.pb.gz` snapshots (`go tool pprof -sample_index=alloc_space -base <allocs0> <allocs1>`).\n")
	}
	return b.String()
}

// beforeAfter writes, per gateway target and concurrency, the medians over
// the rounds of this revision's and the baseline's CPU per request.
func beforeAfter(b *strings.Builder, o options, cells []cell) {
	type key struct {
		target string
		conc   int
	}
	per := func(c cell) (total, own float64) {
		total = perReq(c.GatewayCPU, c.Res.Requests)
		own = math.NaN()
		if c.RenderShare >= 0 {
			own = total * (1 - c.RenderShare)
		}
		return total, own
	}
	group := map[key][]cell{}
	for _, c := range cells {
		group[key{c.Target, c.Conc}] = append(group[key{c.Target, c.Conc}], c)
	}
	median := func(cs []cell, f func(cell) float64) float64 {
		v := make([]float64, 0, len(cs))
		for _, c := range cs {
			v = append(v, f(c))
		}
		slices.Sort(v)
		if len(v) == 0 {
			return math.NaN()
		}
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	fmt.Fprintf(b, "\nBefore (baseline) and after (this revision), median of %d interleaved round(s) per cell, same run:\n\n", o.rounds)
	b.WriteString("| target | concurrency | requests/s before → after | p50 before → after | p99 before → after | gateway CPU/req before → after | excl. render before → after | after ÷ before (excl. render) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range o.targets {
		if t == targetDirect {
			continue
		}
		for _, conc := range o.conc {
			after, before := group[key{t, conc}], group[key{t + " (baseline)", conc}]
			if len(after) == 0 || len(before) == 0 {
				continue
			}
			rps := func(c cell) float64 { return c.Res.RPS() }
			p50 := func(c cell) float64 { return ms(c.Res.P50) }
			p99 := func(c cell) float64 { return ms(c.Res.P99) }
			tot := func(c cell) float64 { v, _ := per(c); return v }
			own := func(c cell) float64 { _, v := per(c); return v }
			ob, oa := median(before, own), median(after, own)
			fmt.Fprintf(b, "| %s | %d | %.0f → %.0f | %.2f → %.2f ms | %.2f → %.2f ms | %.3f → %.3f ms | %.3f → %.3f ms | %.2f |\n",
				t, conc, median(before, rps), median(after, rps), median(before, p50), median(after, p50),
				median(before, p99), median(after, p99), median(before, tot), median(after, tot), ob, oa, oa/ob)
		}
	}
}

// againstDirect writes, per gateway target and concurrency, its requests/s
// over direct's in the same round (every round, then the median), the same
// ratio computed from CPU alone (direct's total CPU per request, engines and
// load generator, over the target's, gateway included: the rate ratio the
// processes would reach if they always got the same CPU, which a shared
// machine does not give them), and how the target's CPU per request splits
// between the engines, the gateway and the load generator. The last ratio
// leaves the gateway's CPU out (direct's over the target's engines and load
// generator alone): the most the CPU ratio could reach with a gateway that
// cost nothing, which tells how much of the gap is the gateway's and how
// much the engines' (a render exchange, for the precise targets).
func againstDirect(b *strings.Builder, o options, cells []cell) {
	type key struct {
		target      string
		conc, round int
	}
	byKey := map[key]cell{}
	for _, c := range cells {
		byKey[key{c.Target, c.Conc, c.Round}] = c
	}
	total := func(c cell) float64 {
		return perReq(c.EnginesCPU+c.GatewayCPU+c.LoadGenCPU, c.Res.Requests)
	}
	var rows []string
	for _, conc := range o.conc {
		for _, t := range []string{targetPrecise, targetPrecise + " (baseline)", targetPreciseOnce, targetPreciseOnce + " (baseline)", targetRoundRobin, targetRoundRobin + " (baseline)", targetRoundRobinExchange, targetRoundRobinExchange + " (baseline)"} {
			var rates, cpus, free, rounds []string
			var rv []float64
			var eng, gw, gen float64
			for round := 1; round <= o.rounds; round++ {
				d, okd := byKey[key{targetDirect, conc, round}]
				g, okg := byKey[key{t, conc, round}]
				if !okd || !okg || d.Res.RPS() == 0 || total(g) == 0 {
					continue
				}
				r := g.Res.RPS() / d.Res.RPS()
				rv = append(rv, r)
				rates = append(rates, fmt.Sprintf("%.2f", r))
				cpus = append(cpus, fmt.Sprintf("%.2f", total(d)/total(g)))
				free = append(free, fmt.Sprintf("%.2f", total(d)/perReq(g.EnginesCPU+g.LoadGenCPU, g.Res.Requests)))
				rounds = append(rounds, fmt.Sprintf("%.0f / %.0f", g.Res.RPS(), d.Res.RPS()))
				eng += perReq(g.EnginesCPU, g.Res.Requests) / total(g)
				gw += perReq(g.GatewayCPU, g.Res.Requests) / total(g)
				gen += perReq(g.LoadGenCPU, g.Res.Requests) / total(g)
			}
			if len(rv) == 0 {
				continue
			}
			slices.Sort(rv)
			med := rv[len(rv)/2]
			if len(rv)%2 == 0 {
				med = (rv[len(rv)/2-1] + rv[len(rv)/2]) / 2
			}
			n := float64(len(rv))
			rows = append(rows, fmt.Sprintf("| %s | %d | %s | %s | **%.2f** | %s | %s | %.0f / %.0f / %.0f %% |", t, conc, strings.Join(rounds, ", "),
				strings.Join(rates, ", "), med, strings.Join(cpus, ", "), strings.Join(free, ", "), 100*eng/n, 100*gw/n, 100*gen/n))
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\nThrough the gateway against direct, same run, per round (each round runs every target once, the order alternating):\n\n" +
		"| target | concurrency | requests/s target / direct, per round | requests/s ÷ direct, per round | median | CPU ratio per round (direct's CPU/req ÷ target's, all processes) | the same without the gateway's CPU (a free gateway's ceiling) | target's CPU/req: engines / gateway / load generator |\n" +
		"|---|---:|---|---|---:|---|---|---:|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n")
}
