package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/kvroute/kvroute/e2e"
	"github.com/kvroute/kvroute/internal/cliflag"
)

func main() {
	if e2e.RunReplicaGatewayChild() { // this process is the --replicas demo's second gateway
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	cliflag.Exit("demo", err)
}

// replicas is the --replicas flag (1: the single-gateway demo, 2: RunReplicas).
var replicas int

// pd is the --pd flag: the prefill/decode step (e2e.RunPD) instead.
var pd bool

func parseFlags(args []string, stderr io.Writer) (e2e.Options, error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o e2e.Options
	var verbose bool
	fs.IntVar(&replicas, "replicas", 1, "gateway replicas: 2 runs the active-active demo (needs redis-server on PATH; see e2e/replicas.go)")
	fs.BoolVar(&pd, "pd", false, "the prefill/decode step instead: aggregated serving, always-split and the decider on 2 prefill + 2 decode engines (see e2e/pd.go)")
	fs.BoolVar(&o.Fast, "fast", false, "short burst interval and load (seconds instead of about 80 s)")
	fs.DurationVar(&o.Interval, "interval", 0, "time between the burst's requests (default 3s; 100ms with --fast)")
	fs.IntVar(&o.LoadRequests, "load-requests", 0, "requests per policy in the comparison (default 240; 48 with --fast)")
	fs.IntVar(&o.Engines, "engines", 2, "number of simulated engines")
	fs.IntVar(&o.EngineBlocks, "engine-blocks", 0, "KV-cache blocks per engine (default 128: about four of the comparison's eight prompts)")
	fs.IntVar(&o.LoadGroups, "load-groups", 0, "distinct shared system prompts in the comparison (default 8)")
	fs.BoolVar(&o.Hold, "hold", false, "keep the engines and gateways running after the demo until Ctrl-C")
	fs.BoolVar(&verbose, "verbose", false, "print the components' logs to standard error")
	if err := cliflag.Parse(fs, args, os.Stdout); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.Interval < 0 || o.LoadRequests < 0 || o.EngineBlocks < 0 || o.LoadGroups < 0 || o.Engines < 1 {
		return o, errors.New("--interval, --load-requests, --engine-blocks and --load-groups must not be negative, --engines must be >= 1")
	}
	if replicas != 1 && replicas != 2 {
		return o, errors.New("--replicas must be 1 or 2")
	}
	if pd && (replicas != 1 || o.Hold) {
		return o, errors.New("--pd runs alone: not with --replicas 2 or --hold (it stops each policy's engines before the next starts)")
	}
	if err := refuseUnread(fs); err != nil {
		return o, err
	}
	if verbose {
		o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return o, nil
}

// refuseUnread refuses a flag the chosen mode does not read, rather than
// accept it and run without it: --pd runs four engines of its own and
// neither the burst nor the comparison; --replicas 2 runs its own burst
// and no comparison.
func refuseUnread(fs *flag.FlagSet) error {
	var unread []string
	switch {
	case pd:
		unread = []string{"engines", "interval", "load-requests", "load-groups"}
	case replicas == 2:
		unread = []string{"interval", "load-requests", "load-groups"}
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && slices.Contains(unread, f.Name) {
			mode := "--pd"
			if !pd {
				mode = "--replicas 2"
			}
			err = fmt.Errorf("--%s has no effect with %s", f.Name, mode)
		}
	})
	return err
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if replicas == 2 {
		_, err = e2e.RunReplicas(ctx, o, stdout)
		return err
	}
	if pd {
		_, err = e2e.RunPD(ctx, o, stdout)
		return err
	}
	_, err = e2e.Run(ctx, o, stdout)
	return err
}
