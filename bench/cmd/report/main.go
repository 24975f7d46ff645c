package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kvroute/kvroute/bench/internal/outdir"
	"github.com/kvroute/kvroute/internal/cliflag"
)

// Headline is the -bench pattern of the headline set; Scale adds the
// scaling ladders.
const (
	Headline = "^Benchmark(Keys|Match|Apply|Pick|Render|SubscriberThroughput|Memory|MemoryShared|FloorMatch|FloorHash|FloorApply|Ratio)$"
	Scale    = "^Benchmark(Keys|Match|Apply|Pick|Render|SubscriberThroughput|Memory|MemoryShared|FloorMatch|FloorHash|FloorApply|Ratio|ScaleMemberships|ScaleEndpoints|MatchUnderIngest)$"
)

func main() {
	cliflag.Exit("report", run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// Env describes the machine a report was produced on.
type Env struct {
	Date       time.Time
	CPU        string
	NumCPU     int
	GOMAXPROCS string
	GoVersion  string
	OSArch     string
	Command    string
	LoadBefore string // /proc/loadavg 1-minute figure, "" when unknown
	LoadAfter  string
	Note       string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	benchtime := fs.String("benchtime", "1s", "go test -benchtime")
	count := fs.Int("count", 3, "go test -count (the median is reported)")
	scale := fs.Bool("scale", true, "also run the ScaleMemberships and ScaleEndpoints ladders")
	short := fs.Bool("short", false, "pass -short (skips the 10^7-membership and 1,024-endpoint rungs)")
	out := fs.String("out", "", "directory to write RESULTS.md into (default <module root>/out/report, ignored by git; -out bench updates the committed report)")
	from := fs.String("from", "", "parse this saved `go test -bench` output instead of running the benchmarks")
	note := fs.String("note", "", "a note to print at the top of the report")
	goBin := fs.String("go", "go", "the go command")
	if err := cliflag.Parse(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *count < 1 {
		return errors.New("-count must be at least 1")
	}
	root, err := outdir.ModuleRoot()
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(root, "out", "report")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	outFile := filepath.Join(*out, "RESULTS.md")
	pattern := Headline
	if *scale {
		pattern = Scale
	}
	goArgs := []string{"test", "-run", "^$", "-bench", pattern, "-benchmem", "-benchtime", *benchtime, "-count", strconv.Itoa(*count), "-timeout", "60m"}
	if *short {
		goArgs = append(goArgs, "-short")
	}
	goArgs = append(goArgs, "./bench")

	env := Env{Date: time.Now().UTC(), NumCPU: runtime.NumCPU(), OSArch: runtime.GOOS + "/" + runtime.GOARCH, Note: *note,
		GOMAXPROCS: os.Getenv("GOMAXPROCS")}
	if env.GOMAXPROCS == "" {
		env.GOMAXPROCS = strconv.Itoa(runtime.NumCPU()) + " (unset: the CPU count)"
	}
	env.GoVersion = goVersion(ctx, *goBin, root)
	var raw []byte
	if *from != "" {
		if raw, err = os.ReadFile(*from); err != nil {
			return err
		}
		env.Command = "go " + quoteArgs(goArgs) + " (parsed from " + filepath.Base(*from) + ")"
	} else {
		env.Command = "go " + quoteArgs(goArgs)
		env.LoadBefore = loadAvg()
		fmt.Fprintf(stderr, "report: running %s (this takes a few minutes: first the compile, then each benchmark's lines as it finishes)\n", env.Command)
		cmd := exec.CommandContext(ctx, *goBin, goArgs...)
		cmd.Dir = root
		var buf bytes.Buffer
		progress := &progressWriter{w: stderr}
		out := io.MultiWriter(&buf, progress) // one writer for both: the command's output in order
		cmd.Stdout, cmd.Stderr = out, out
		stop := progress.heartbeat(heartbeat)
		runErr := cmd.Run()
		stop()
		raw = buf.Bytes()
		env.LoadAfter = loadAvg()
		if runErr != nil {
			return fmt.Errorf("go test failed: %w", runErr)
		}
	}
	parsed, err := Parse(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if parsed.Failed {
		return errors.New("the benchmark output reports a failure")
	}
	if len(parsed.Benches) == 0 {
		return errors.New("no benchmark results in the output")
	}
	env.CPU = parsed.CPU
	if env.CPU == "" {
		env.CPU = cpuModel()
	}
	var md bytes.Buffer
	Write(&md, env, parsed, raw)
	if err := os.WriteFile(outFile, md.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "report: wrote %s\n", outFile)
	for _, r := range Ratios {
		if il, _, met, ok := r.Verdict(parsed); ok {
			fmt.Fprintf(stdout, "  %-38s %.2f× floor%-15s target ≤ %.1f×%-13s %s\n", r.Bench, il, "", r.Limit, "", verdict(met))
		}
	}
	for _, t := range Targets {
		if b, ok := parsed.Find(t.Bench); ok {
			if m, met, ok := t.Verdict(b); ok {
				fmt.Fprintf(stdout, "  %-32s %-28s target %-22s %s\n", t.Bench, m, t.Display, verdict(met))
			}
		}
	}
	return nil
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "NOT met"
}

// quoteArgs renders args for a shell, quoting the ones with metacharacters.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, "^$|()*? ") {
			a = "'" + a + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

func goVersion(ctx context.Context, goBin, dir string) string {
	cmd := exec.CommandContext(ctx, goBin, "env", "GOVERSION")
	cmd.Dir = dir
	if out, err := cmd.Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	return runtime.Version()
}

// loadAvg returns the 1-minute load average, or "" off Linux.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return ""
}

// cpuModel reads the CPU model from /proc/cpuinfo, for outputs without a
// "cpu:" line.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
