package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/bench/internal/outdir"
	"github.com/kvroute/kvroute/internal/cliflag"
)

func main() {
	if ok, err := runRole(); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, "gwload child:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "gwload:", err)
		os.Exit(1)
	}
}

// DefaultOut is the output directory under the module root when -out is
// not given; git ignores out/.
const DefaultOut = "out/gwload"

// options are the command's flags.
type options struct {
	out          string
	conc         []int
	targets      []string
	window       time.Duration
	warmup       time.Duration
	prefixTokens int
	model        string
	attribute    bool
	engineProf   bool
	rounds       int
	fleet        int
	fleetRate    float64
	fleetWindow  time.Duration
	baseline     string
}

// Targets of the load.
const (
	targetDirect     = "direct"      // the load generator spreads requests over the engines itself
	targetPrecise    = "precise"     // through the gateway with precise prefix-cache routing
	targetRoundRobin = "round-robin" // through the gateway, cache-blind (no render, no routing)
	// targetPreciseOnce is targetPrecise with tokenize-once on: the gateway
	// forwards the rendered token IDs, so the engines do not tokenize the
	// prompt again.
	targetPreciseOnce = "precise-once"
	// targetRoundRobinExchange is round-robin with one bodiless exchange
	// with an engine before each request is proxied: the floor of any
	// gateway that renders on the engines (see exchangeFront).
	targetRoundRobinExchange = "round-robin-exchange"
)

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("gwload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var conc, targets string
	fs.StringVar(&o.out, "out", "", "output directory for gwload.md, fleet.md and the gateway's CPU profile (default <module root>/"+DefaultOut+")")
	fs.StringVar(&conc, "concurrency", "4,16,64,256", "comma-separated numbers of concurrent closed-loop clients")
	fs.StringVar(&targets, "targets", "direct,precise,round-robin", "comma-separated targets: direct, precise, precise-once (precise with tokenize-once), round-robin, round-robin-exchange (round-robin plus one bodiless exchange with an engine per request: a floor for any gateway that renders on the engines)")
	fs.DurationVar(&o.window, "duration", 5*time.Second, "measured window per cell")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before each window")
	fs.IntVar(&o.prefixTokens, "prefix-tokens", 2000, "tokens of the prompt prefix every request shares")
	fs.StringVar(&o.model, "model", "sim-model", "model the engines serve")
	fs.BoolVar(&o.attribute, "attribute", true, "profile every gateway window (CPU, and allocations before and after it), attribute its CPU to render by pprof label, and keep the profiles in -out")
	fs.BoolVar(&o.engineProf, "engine-profile", false, "also CPU-profile the first engine in every window (engine0-<target>-c<N>[-r<round>].pprof in -out), to see where the engines' CPU per request goes")
	fs.IntVar(&o.rounds, "rounds", 1, "rounds per concurrency; each round runs every target once, alternating the order (with -baseline: old and new interleaved)")
	fs.IntVar(&o.fleet, "fleet", 0, "instead of the HTTP load, measure an event pool subscribed to this many KV-event publishers")
	fs.Float64Var(&o.fleetRate, "fleet-rate", 10, "messages per second each fleet publisher sends")
	fs.StringVar(&o.baseline, "baseline", "", "a gwload binary built from another revision: each gateway target also runs with its gateway from that binary, in the same run (before/after)")
	fs.DurationVar(&o.fleetWindow, "fleet-duration", 20*time.Second, "measured window of the fleet run")
	if err := cliflag.Parse(fs, args, os.Stdout); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for s := range strings.SplitSeq(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return o, fmt.Errorf("--concurrency: %q is not a positive integer", s)
		}
		o.conc = append(o.conc, n)
	}
	for s := range strings.SplitSeq(targets, ",") {
		switch s = strings.TrimSpace(s); s {
		case targetDirect, targetPrecise, targetRoundRobin, targetPreciseOnce, targetRoundRobinExchange:
			o.targets = append(o.targets, s)
		default:
			return o, fmt.Errorf("--targets: unknown target %q", s)
		}
	}
	switch {
	case o.window <= 0 || o.warmup < 0:
		return o, errors.New("--duration must be > 0 and --warmup >= 0")
	case o.rounds < 1:
		return o, errors.New("--rounds must be >= 1")
	case o.prefixTokens < 1:
		return o, errors.New("--prefix-tokens must be >= 1")
	case o.fleet < 0 || !(o.fleetRate > 0) || math.IsInf(o.fleetRate, 0) || o.fleetWindow <= 0:
		return o, errors.New("--fleet must be >= 0, --fleet-rate a finite number > 0 and --fleet-duration > 0")
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.out, err = outdir.Resolve(o.out, DefaultOut); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if o.fleet > 0 {
		return runFleet(o, stdout)
	}
	env := captureEnv()
	cells, err := runCells(o, stderr)
	env.finish()
	if err != nil {
		return err
	}
	md := renderReport(o, env, cells)
	path := filepath.Join(o.out, "gwload.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Fprint(stdout, md)
	fmt.Fprintf(stderr, "gwload: wrote %s\n", path)
	return nil
}

// cell is one (target, concurrency, round) measurement.
type cell struct {
	Target      string
	Conc        int
	Round       int // 1-based
	Res         loadResult
	GatewayCPU  time.Duration // the gateway process over the window (0 for direct)
	EnginesCPU  time.Duration // both engine processes
	LoadGenCPU  time.Duration // this process
	TimeWaitNew int           // TIME_WAIT sockets to the engines' addresses, end minus start
	NewConns    int64         // connections the engines accepted over the window
	// ClosedByClient and ClosedByEngine are the engines' connections
	// closed over the window, by the side that closed first.
	ClosedByClient, ClosedByEngine int64
	// RenderShare is the share of the gateway's profiled CPU that went to
	// render (the render client's HTTP attempts and its connections'
	// goroutines, by pprof label); -1 when not profiled.
	RenderShare float64
	Mem         memStats // the gateway's allocation and GC counters over the window
}

// gatewayRun is one gateway under test: a target, the binary its child runs
// ("" this one) and its label in the report.
type gatewayRun struct {
	target, exe, label string
	gw                 *child // nil for direct
	gen                *loadGen
	urls               []string
}

// runCells starts two engines and every gateway (this binary's and, with
// -baseline, the baseline binary's, for each gateway target), then measures
// every concurrency: for each one, -rounds rounds in which every target runs
// once, in alternating order, so that before and after interleave on the
// same engines and the same machine load.
func runCells(o options, log io.Writer) (cells []cell, err error) {
	var engines []*child
	var runs []*gatewayRun
	defer func() {
		for _, r := range runs {
			if r.gen != nil {
				r.gen.close()
			}
			if r.gw != nil {
				err = errors.Join(err, r.gw.stop())
			}
		}
		for _, e := range engines {
			err = errors.Join(err, e.stop())
		}
	}()
	var eps []kvroute.Endpoint
	ports := map[string]bool{} // the engines' "ip:port", for timeWaitTo
	var direct []string
	for i := range 2 {
		e, err := startChild("", fmt.Sprintf("engine %d", i), "engine", engineArgs{Model: o.model})
		if err != nil {
			return nil, err
		}
		engines = append(engines, e)
		var r engineReady
		if err := json.Unmarshal(e.ready, &r); err != nil {
			return nil, err
		}
		eps = append(eps, kvroute.Endpoint{ID: r.ID, EventsAddress: r.Events})
		direct = append(direct, "http://"+r.ID)
		ports[r.ID] = true
	}
	maxConc := 0
	for _, c := range o.conc {
		maxConc = max(maxConc, c)
	}
	for _, t := range o.targets {
		runs = append(runs, &gatewayRun{target: t, label: t})
		if t != targetDirect && o.baseline != "" {
			runs = append(runs, &gatewayRun{target: t, exe: o.baseline, label: t + " (baseline)"})
		}
	}
	for _, rn := range runs {
		rn.urls = direct
		if rn.target != targetDirect {
			rn.gw, err = startChild(rn.exe, "gateway "+rn.label, "gateway", gatewayArgs{Policy: policyOf(rn.target), Model: o.model, Endpoints: eps,
				TokenizeOnce: rn.target == targetPreciseOnce, Exchange: rn.target == targetRoundRobinExchange})
			if err != nil {
				return cells, err
			}
			var r gatewayReady
			if err := json.Unmarshal(rn.gw.ready, &r); err != nil {
				return cells, err
			}
			rn.urls = []string{r.URL}
		}
		rn.gen = newLoadGen(o.model, o.prefixTokens, maxConc)
	}
	accepted := func() (n engineStats) {
		for _, e := range engines {
			var st engineStats
			if e.call("stats", &st) == nil {
				n.Accepted += st.Accepted
				n.ClosedByClient += st.ClosedByClient
				n.ClosedByEngine += st.ClosedByEngine
			}
		}
		return n
	}
	var last *gatewayRun // the run measured last
	for _, conc := range o.conc {
		for round := 1; round <= o.rounds; round++ {
			order := slices.Clone(runs)
			if round%2 == 0 {
				slices.Reverse(order)
			}
			for _, rn := range order {
				c, err := measure(o, rn, conc, round, engines, ports, accepted, rn != last)
				last = rn
				if err != nil {
					return cells, err
				}
				share := "—"
				if c.RenderShare >= 0 {
					share = fmt.Sprintf("%.0f %%", 100*c.RenderShare)
				}
				fmt.Fprintf(log, "gwload: %-24s c=%-3d r%d %7.0f req/s  p50 %6.2f ms  p99 %6.2f ms  errors %d  gateway CPU %.3f ms/req (render %s)  new engine conns %d\n",
					rn.label, conc, round, c.Res.RPS(), ms(c.Res.P50), ms(c.Res.P99), c.Res.Errors, perReq(c.GatewayCPU, c.Res.Requests), share, c.NewConns)
				cells = append(cells, c)
			}
		}
	}
	return cells, nil
}

// measure runs one cell: the engines close the connections left open by
// the cells before when drop is set (the cell before measured another
// run), then warmup, then a window sampled for CPU, churn and
// (for gateways) allocation counters and a CPU profile.
func measure(o options, rn *gatewayRun, conc, round int, engines []*child, ports map[string]bool, accepted func() engineStats, drop bool) (cell, error) {
	c := cell{Target: rn.label, Conc: conc, Round: round, RenderShare: -1}
	var gw0, en0, self0 time.Duration
	var tw0 int
	var acc0 engineStats
	var mem0 memStats
	gw := rn.gw
	base := filepath.Join(o.out, fmt.Sprintf("gateway-%s-c%d", slug(rn.label), conc))
	if o.rounds > 1 {
		base += fmt.Sprintf("-r%d", round)
	}
	pfile, a0, a1 := base+".pprof", base+".allocs0.pb.gz", base+".allocs1.pb.gz"
	profile := gw != nil && o.attribute
	efile := filepath.Join(o.out, "engine0-"+strings.TrimPrefix(filepath.Base(base), "gateway-")+".pprof")
	sample := func() (gwc, enc, self time.Duration) {
		if gw != nil {
			gwc, _ = gw.cpu()
		}
		for _, e := range engines {
			d, _ := e.cpu()
			enc += d
		}
		self, _ = procCPU("self")
		return
	}
	// With drop, the connections the cells before left idle are closed
	// first: the engines' keep-alive timeout would close them during this
	// window, counted as this target's churn (see
	// countingListener.closeAll). Without it the cell before was this
	// run's own, and so are the connections it left: a close of one in
	// this window is this target's churn.
	var callErr error
	if drop {
		for _, e := range engines {
			callErr = errors.Join(callErr, e.call("drop", &droppedConns{}))
		}
	}
	if callErr != nil {
		return c, callErr
	}
	c.Res = rn.gen.run(rn.urls, conc, o.warmup, o.window, func(start bool) {
		if start {
			if gw != nil {
				callErr = errors.Join(callErr, gw.call("mem", &mem0))
			}
			if profile {
				callErr = errors.Join(callErr, gw.call("allocs "+a0, nil), gw.call("profile "+pfile, nil))
			}
			if o.engineProf {
				callErr = errors.Join(callErr, engines[0].call("profile "+efile, nil))
			}
			gw0, en0, self0 = sample()
			tw0 = timeWaitTo(ports)
			acc0 = accepted()
			return
		}
		gw1, en1, self1 := sample()
		c.GatewayCPU, c.EnginesCPU, c.LoadGenCPU = gw1-gw0, en1-en0, self1-self0
		c.TimeWaitNew = timeWaitTo(ports) - tw0
		acc1 := accepted()
		c.NewConns = acc1.Accepted - acc0.Accepted
		c.ClosedByClient, c.ClosedByEngine = acc1.ClosedByClient-acc0.ClosedByClient, acc1.ClosedByEngine-acc0.ClosedByEngine
		if o.engineProf {
			callErr = errors.Join(callErr, engines[0].call("unprofile", nil))
		}
		if profile {
			callErr = errors.Join(callErr, gw.call("unprofile", nil), gw.call("allocs "+a1, nil))
		}
		if gw != nil {
			var mem1 memStats
			callErr = errors.Join(callErr, gw.call("mem", &mem1))
			c.Mem = memStats{AllocBytes: mem1.AllocBytes - mem0.AllocBytes, Allocs: mem1.Allocs - mem0.Allocs,
				GCCycles: mem1.GCCycles - mem0.GCCycles, GCCPU: mem1.GCCPU - mem0.GCCPU}
		}
	})
	if callErr != nil {
		return c, callErr
	}
	if profile {
		b, err := os.ReadFile(pfile)
		if err != nil {
			return c, err
		}
		if c.RenderShare, _, err = renderShare(b); err != nil {
			return c, fmt.Errorf("%s: %w", pfile, err)
		}
	}
	return c, nil
}

// slug turns a target label into a file name part.
func slug(label string) string {
	label = strings.NewReplacer(" (", "-", ")", "", " ", "-").Replace(label)
	return label
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// perReq returns d per request in milliseconds.
func perReq(d time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return ms(d) / float64(n)
}
