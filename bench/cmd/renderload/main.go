package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kvroute/kvroute/bench/internal/outdir"
	"github.com/kvroute/kvroute/internal/cliflag"
)

// options are renderload's flags.
type options struct {
	duration   time.Duration
	renderers  int
	workers    int
	renderTime time.Duration
	words      int
	loads      []float64
	out        string
}

func main() {
	cliflag.Exit("renderload", run(os.Args[1:], os.Stdout))
}

func run(args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("renderload", flag.ContinueOnError)
	fs.DurationVar(&o.duration, "duration", 15*time.Second, "how long requests arrive, per scenario and load")
	fs.IntVar(&o.renderers, "renderers", 2, "simulated engines, each rendering")
	fs.IntVar(&o.workers, "workers", 1, "render workers per engine")
	fs.DurationVar(&o.renderTime, "render-time", 100*time.Millisecond, "a worker's time per prompt (a 49k-token prompt on one vLLM renderer core)")
	fs.IntVar(&o.words, "words", 8192, "words per prompt (about one token each)")
	loads := fs.String("loads", "0.5,2", "offered loads, as multiples of the renderers' capacity")
	fs.StringVar(&o.out, "out", "", "output directory (default out/renderload under the module root)")
	if err := cliflag.Parse(fs, args, stdout); err != nil {
		return err
	}
	for _, f := range strings.Split(*loads, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			return fmt.Errorf("-loads: %q is not a positive number", f)
		}
		o.loads = append(o.loads, v)
	}
	if o.renderers < 2 || o.workers < 1 || o.renderTime <= 0 || o.words < 1 || o.duration <= 0 {
		return errors.New("need -renderers >= 2 (hedging needs another endpoint), -workers >= 1 and positive -render-time, -words, -duration")
	}
	var results []result
	for _, load := range o.loads {
		for _, sc := range scenarios {
			fmt.Fprintf(os.Stderr, "renderload: %s at %.2g× capacity...\n", sc.name, load)
			r, err := runScenario(o, sc, load)
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	}
	report := markdown(o, results)
	fmt.Fprint(stdout, report)
	dir, err := outdir.Resolve(o.out, "out/renderload")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "renderload.md"), []byte(report), 0o644)
}

// markdown writes the results as a table, with the setup.
func markdown(o options, rs []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Render under pressure: %d simulated engines rendering on %d worker(s) each, %v per prompt of ~%d tokens (capacity %.0f renders/s), requests arriving on a fixed schedule for %v; GOMAXPROCS=%d, %s/%s, %s.\n\n",
		o.renderers, o.workers, o.renderTime, o.words, float64(o.renderers*o.workers)/o.renderTime.Seconds(), o.duration,
		runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	b.WriteString("| render client | offered load | offered req/s | routed req/s | routed with tokens | with tokens req/s | Pick p50 | Pick p99 | renders abandoned by their client | renderer backlog at the end |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %.2g× | %.1f | %.1f | %.0f %% | %.1f | %v | %v | %.0f | %.0f |\n",
			r.scenario, r.load, r.offered, r.routedPerSecond(), 100*r.tokenizedShare(), r.tokenizedPerSecond(),
			r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.abandoned, r.backlog)
	}
	return b.String()
}
