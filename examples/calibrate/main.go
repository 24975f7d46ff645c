package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/internal/cliflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "calibrate:", err)
		os.Exit(1)
	}
}

// config holds the parsed command line.
type config struct {
	endpoint     string // full /v1/completions URL
	model        string
	chunk        int
	warmup       int
	measurements int
	timeout      time.Duration
	minTokenID   int
	maxTokenID   int
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("calibrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	var base string
	fs.StringVar(&base, "url", "", "base URL of the OpenAI-compatible endpoint, e.g. http://10.0.0.1:8000 (required)")
	fs.StringVar(&cfg.model, "model", "", "model name sent in each request (required)")
	fs.IntVar(&cfg.chunk, "chunk-size", 8192, "prompt length in tokens; must equal the engine's --max-num-batched-tokens")
	fs.IntVar(&cfg.warmup, "warmup", 5, "warm-up requests, not measured")
	fs.IntVar(&cfg.measurements, "measurements", 20, fmt.Sprintf("measured requests (at least %d)", affinity.MinCalibrationSamples))
	fs.DurationVar(&cfg.timeout, "timeout", 2*time.Minute, "timeout of each request")
	fs.IntVar(&cfg.minTokenID, "min-token-id", 1000, "smallest random token ID")
	fs.IntVar(&cfg.maxTokenID, "max-token-id", 30000, "random token IDs are below this; must not exceed the vocabulary size")
	if err := cliflag.Parse(fs, args, os.Stdout); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	endpoint, err := completionsURL(base)
	if err != nil {
		return config{}, err
	}
	cfg.endpoint = endpoint
	switch {
	case cfg.model == "":
		return config{}, errors.New("--model is required")
	case cfg.chunk <= 0:
		return config{}, fmt.Errorf("--chunk-size must be > 0, got %d", cfg.chunk)
	case cfg.warmup < 0:
		return config{}, fmt.Errorf("--warmup must be >= 0, got %d", cfg.warmup)
	case cfg.measurements < affinity.MinCalibrationSamples:
		return config{}, fmt.Errorf("--measurements must be >= %d, got %d", affinity.MinCalibrationSamples, cfg.measurements)
	case cfg.timeout <= 0:
		return config{}, fmt.Errorf("--timeout must be > 0, got %v", cfg.timeout)
	case cfg.minTokenID < 0 || cfg.maxTokenID <= cfg.minTokenID || cfg.maxTokenID > math.MaxUint32:
		return config{}, fmt.Errorf("token IDs need 0 <= --min-token-id < --max-token-id <= %d, got %d and %d",
			uint32(math.MaxUint32), cfg.minTokenID, cfg.maxTokenID)
	}
	return cfg, nil
}

// completionsURL turns a base URL into the /v1/completions URL.
func completionsURL(base string) (string, error) {
	if base == "" {
		return "", errors.New("--url is required")
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("--url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--url must be an http(s) URL with a host, got %q", base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(u.Path, "/v1/completions") {
		u.Path += "/v1/completions"
	}
	return u.String(), nil
}

// run parses args, measures, and prints the result line on stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	defer transport.CloseIdleConnections()
	p := &prober{
		client:   &http.Client{Transport: transport},
		endpoint: cfg.endpoint,
		model:    cfg.model,
		timeout:  cfg.timeout,
		now:      time.Now,
	}
	peak, err := calibrate(ctx, p, cfg, newRand(), stderr)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "PEAK_PREFILL_THROUGHPUT=%s\n", formatThroughput(peak))
	return err
}

// newRand returns a randomly seeded generator, so that no run repeats the
// prompts of an earlier one (they would hit the prefix cache).
func newRand() *rand.Rand { return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())) }

// calibrate sends the warm-up and measured requests sequentially and returns
// chunk / median TTFT. Any failed request aborts the calibration: it must run
// against a healthy, idle deployment.
func calibrate(ctx context.Context, p *prober, cfg config, rng *rand.Rand, log io.Writer) (float64, error) {
	prompt := make([]uint32, cfg.chunk)
	span := uint32(cfg.maxTokenID - cfg.minTokenID)
	ttfts := make([]time.Duration, 0, cfg.measurements)
	for i := range cfg.warmup + cfg.measurements {
		for j := range prompt {
			prompt[j] = uint32(cfg.minTokenID) + rng.Uint32N(span)
		}
		phase, n, total := "measurement", i-cfg.warmup+1, cfg.measurements
		if i < cfg.warmup {
			phase, n, total = "warm-up", i+1, cfg.warmup
		}
		d, err := p.ttft(ctx, prompt)
		if err != nil {
			return 0, fmt.Errorf("%s %d/%d: %w", phase, n, total, err)
		}
		fmt.Fprintf(log, "%s %d/%d: TTFT %v\n", phase, n, total, d.Round(time.Microsecond))
		if i >= cfg.warmup {
			ttfts = append(ttfts, d)
		}
	}
	peak, err := affinity.PeakPrefillThroughput(cfg.chunk, ttfts)
	if err != nil {
		return 0, err
	}
	sorted := slices.Sorted(slices.Values(ttfts))
	fmt.Fprintf(log, "chunk %d tokens, %d samples, TTFT min %v, max %v -> %s tokens/s\n",
		cfg.chunk, len(sorted), sorted[0], sorted[len(sorted)-1], formatThroughput(peak))
	return peak, nil
}

// formatThroughput prints whole tokens per second, like the reference values.
func formatThroughput(v float64) string {
	if v >= 1 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
