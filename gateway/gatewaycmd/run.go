package gatewaycmd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/checkpoint"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/internal/cliflag"
	"github.com/kvroute/kvroute/internal/yamldoc"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/llmd"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// options is the parsed command line.
type options struct {
	server          gateway.ServerConfig
	shutdownTimeout time.Duration
	drainTimeout    time.Duration // the drain window after SIGINT/SIGTERM (0: none)
	logLevel        slog.Level
	snapshotListen  string         // internal address serving the index snapshot to peers ("" = off)
	findings        []llmd.Finding // llm-d settings of --config not carried over, logged at start
}

func parseFlags(args []string, stdout, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o                     options
		listen, list, epsFile string
		cfgFile, model        string
		policy                string
		eventsPort, replay    int
		maxBody               int64
		observeCached         bool
		tokenizeOnce          string
		level                 string
		checkpointPath, peers string
		checkpointInterval    time.Duration
		peerToken             string
		strictConfig          bool
	)
	fs.StringVar(&listen, "listen", ":8080", "address to serve on")
	fs.StringVar(&list, "endpoints", "", "comma-separated engine addresses ip:port (the identity in their KV-event topics)")
	fs.StringVar(&epsFile, "endpoints-file", "", "YAML or JSON file with the endpoints: [{\"id\":\"ip:port\",\"address\":\"http://...\",\"labels\":{...}}]")
	fs.StringVar(&cfgFile, "config", "", "router configuration (YAML or JSON): kvroute's keys, with the gateway's client limits and timeouts under \"gateway\", or an llm-d EndpointPickerConfig whole; flags below override it")
	fs.BoolVar(&strictConfig, "strict-config", false, "refuse to start when the --config file has llm-d settings kvroute does not carry over (default: log each and start)")
	fs.StringVar(&model, "model", "", "base model name the engines serve")
	fs.IntVar(&eventsPort, "events-port", kvevents.DefaultEventsPort, "engines' KV-event PUB port (vLLM kv-events-config endpoint)")
	fs.IntVar(&replay, "replay-port", kvevents.DefaultReplayPort, "engines' KV-event replay port (replay_endpoint); 0 disables replay")
	fs.StringVar(&policy, "policy", string(gateway.PolicyPrecise), "routing policy: precise or round-robin")
	fs.Int64Var(&maxBody, "max-body-bytes", gateway.DefaultMaxBodyBytes, "request body limit; larger bodies get 413 (overrides the config's gateway.maxBodyBytes)")
	fs.BoolVar(&observeCached, "observe-cached-tokens", false, "read the engines' reported cached prompt tokens (vLLM --enable-prompt-tokens-details) from every response and compare them with the router's prediction")
	fs.StringVar(&tokenizeOnce, "tokenize-once", "", "comma-separated APIs whose requests go to the engines as the rendered token IDs instead of text, so each prompt is tokenized once (only \"completions\" qualifies); overrides the config's gateway.tokenizeOnce")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long requests in flight may finish after SIGINT/SIGTERM")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 0, "after SIGINT/SIGTERM, /ready answers 503 and the gateway keeps serving this long (closing each connection after its response) before it stops accepting, so that the Service or load balancer stops sending to it first (0: stop at once)")
	fs.StringVar(&level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&checkpointPath, "checkpoint", "", "index checkpoint file: loaded at start, rewritten periodically and at shutdown; one router's (locked through <file>.lock: a path another router holds is refused)")
	fs.DurationVar(&checkpointInterval, "checkpoint-interval", checkpoint.DefaultInterval, "period of checkpoint writes (negative: only at shutdown)")
	fs.StringVar(&peers, "peers", "", "comma-separated snapshot URLs of peer gateways (http://host:port/kvroute/snapshot) to load the index from at start")
	fs.StringVar(&peerToken, "peer-token", "", "shared secret for --peers and --snapshot-listen, proved to peers with an HMAC, never sent (default $KVROUTE_PEER_TOKEN)")
	fs.StringVar(&o.snapshotListen, "snapshot-listen", "", "internal address serving this gateway's index snapshot to peers at /kvroute/snapshot (never the public listener)")
	if err := cliflag.Parse(fs, args, stdout); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if err := o.logLevel.UnmarshalText([]byte(level)); err != nil {
		return options{}, fmt.Errorf("--log-level: %w", err)
	}
	cfg := kvroute.DefaultConfig()
	var gw gatewayConfig
	if cfgFile != "" {
		var err error
		if cfg, gw, o.findings, err = loadConfigFile(cfgFile, strictConfig); err != nil {
			return options{}, fmt.Errorf("--config %s: %w", cfgFile, err)
		}
	}
	if set["model"] || cfg.Model == "" {
		cfg.Model = model
	}
	if set["events-port"] || cfgFile == "" {
		cfg.Events.EventsPort = eventsPort
	}
	if replay < 0 {
		return options{}, fmt.Errorf("--replay-port must be >= 0 (0 disables replay), got %d", replay)
	}
	if set["replay-port"] || cfgFile == "" {
		cfg.Events.Replay = new(replay > 0)
		if replay > 0 {
			cfg.Events.ReplayPort = replay
		}
	}
	if set["checkpoint"] {
		cfg.Checkpoint.Path = checkpointPath
	}
	if set["checkpoint-interval"] || cfg.Checkpoint.Interval == 0 {
		cfg.Checkpoint.Interval = checkpointInterval
	}
	if peers != "" {
		// Read as --endpoints is: spaces trimmed, empty entries (a trailing
		// comma) skipped, and a list of none refused.
		var urls []string
		for p := range strings.SplitSeq(peers, ",") {
			if p = strings.TrimSpace(p); p != "" {
				urls = append(urls, p)
			}
		}
		if len(urls) == 0 {
			return options{}, fmt.Errorf("--peers %q lists no URL", peers)
		}
		cfg.Bootstrap.Peers = urls
	}
	tokenSource := "--peer-token"
	if peerToken == "" {
		peerToken, tokenSource = os.Getenv("KVROUTE_PEER_TOKEN"), "$KVROUTE_PEER_TOKEN"
	}
	if peerToken != "" {
		// Checked here, so that the error names where the operator set it
		// rather than the config key it overrides (bootstrap.token).
		if err := (checkpoint.BootstrapConfig{Token: peerToken}).Validate(); err != nil {
			return options{}, fmt.Errorf("%w: %s: %s", kvroute.ErrInvalidConfig, tokenSource, strings.TrimPrefix(err.Error(), "token: "))
		}
		cfg.Bootstrap.Token = peerToken
	}
	if err := cfg.Validate(); err != nil {
		return options{}, err
	}
	if gateway.Policy(policy) == gateway.PolicyRoundRobin {
		// No router: nothing would serve, write or load an index.
		for _, f := range []string{"snapshot-listen", "checkpoint", "peers"} {
			if set[f] {
				return options{}, fmt.Errorf("--%s needs the precise policy (it serves, keeps or loads the Router's index; round-robin has none)", f)
			}
		}
	}
	if cfg.Model == "" && gateway.Policy(policy) != gateway.PolicyRoundRobin {
		return options{}, errors.New("--model (or the config's \"model\") is required: it is the base model the engines serve, which roots every block key")
	}

	var eps []kvroute.Endpoint
	switch {
	case list != "" && epsFile != "":
		return options{}, errors.New("give --endpoints or --endpoints-file, not both")
	case list != "":
		var err error
		if eps, err = gateway.ParseEndpoints(list); err != nil {
			return options{}, fmt.Errorf("--endpoints: %w", err)
		}
	case epsFile != "":
		data, err := readYAML(epsFile)
		if err == nil {
			eps, err = gateway.LoadEndpoints(bytes.NewReader(data))
		}
		if err != nil {
			return options{}, fmt.Errorf("--endpoints-file %s: %w", epsFile, err)
		}
	default:
		return options{}, errors.New("--endpoints or --endpoints-file is required")
	}
	if !set["max-body-bytes"] && gw.MaxBodyBytes > 0 {
		maxBody = gw.MaxBodyBytes
	}
	if maxBody <= 0 {
		return options{}, fmt.Errorf("--max-body-bytes must be > 0, got %d", maxBody)
	}
	if o.shutdownTimeout < 0 {
		return options{}, fmt.Errorf("--shutdown-timeout must be >= 0, got %v", o.shutdownTimeout)
	}
	if o.drainTimeout < 0 {
		return options{}, fmt.Errorf("--drain-timeout must be >= 0, got %v", o.drainTimeout)
	}
	o.server = gateway.ServerConfig{
		Listen:    listen,
		Policy:    gateway.Policy(policy),
		Router:    cfg,
		Endpoints: eps,
	}
	gw.apply(&o.server)
	o.server.Proxy.Model = cfg.Model
	o.server.Proxy.MaxBodyBytes = maxBody
	o.server.Proxy.ObserveCachedTokens = observeCached
	if set["tokenize-once"] {
		o.server.Proxy.TokenizeOnce = nil
		for a := range strings.SplitSeq(tokenizeOnce, ",") {
			if a = strings.TrimSpace(a); a != "" {
				o.server.Proxy.TokenizeOnce = append(o.server.Proxy.TokenizeOnce, render.API(a))
			}
		}
	}
	if b := o.server.Proxy.MaxBodyBytesInFlight; b > 0 && b < maxBody {
		return options{}, fmt.Errorf("gateway.maxBodyBytesInFlight %d is below the body limit %d: a body at the limit could never be read", b, maxBody)
	}
	return o, nil
}

// Options are what a gateway binary adds to the command line; the zero
// value runs the gateway without tracing.
type Options struct {
	// TracerProvider traces every request (the gateway's server span and
	// the router's pick, keys, index_lookup, filter, score and render
	// spans) and the KV-event spans when the configuration enables them.
	// nil traces nothing; the client's traceparent still reaches the engine.
	TracerProvider trace.TracerProvider
	// OTLPBinary names the binary that exports OTLP. When it is set and the
	// environment asks for OTLP export (OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, unless OTEL_SDK_DISABLED=true or
	// OTEL_TRACES_EXPORTER=none turns export off), Run logs once that this binary
	// does not export and names that one, so that the variable is not
	// silently ignored.
	OTLPBinary string
}

// Name is the program's name, as a user runs it: the flag set's, used in
// usage and error messages.
const Name = "kvroute-gateway"

// Run parses args (the command line without the program name), serves
// until ctx ends or the gateway's listener or its --snapshot-listen
// listener fails on its own (then, after the same shutdown, it returns that
// error, so the process exits rather than stay up serving nothing, or
// serving without the snapshot its peers bootstrap from), then shuts down
// gracefully within --shutdown-timeout. When ctx ends and --drain-timeout
// is set, the shutdown begins with that drain window (gateway.Server.Drain:
// /ready answers 503, requests are still served), which a failing listener
// cuts short. Output for the operator (the
// listening URL) and --help's usage go to stdout, logs to stderr. A --help
// returns flag.ErrHelp.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, opts Options) error {
	return run(ctx, args, stdout, stderr, opts, nil)
}

// run is Run; started, when not nil, is handed the snapshot server once it
// serves (nil without --snapshot-listen), so that a test can fail its
// listener under it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, opts Options, started func(*snapshotServer)) error {
	o, err := parseFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))
	for _, f := range o.findings {
		log.Warn("llm-d setting not carried over", "key", f.Path, "finding", f.Kind.String(), "note", f.Note)
	}
	if opts.OTLPBinary != "" && otlpRequested(os.Getenv) {
		log.Warn("OTEL_EXPORTER_OTLP_ENDPOINT is set, but this gateway does not export OTLP; run "+opts.OTLPBinary+" for OTLP export",
			"otlp_binary", opts.OTLPBinary)
	}
	srv, err := gateway.NewServer(ctx, o.server, gateway.Options{Set: telemetry.Set{Logger: log, TracerProvider: opts.TracerProvider}})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "gateway: serving on %s (policy %s, %d endpoints, model %q); metrics at %s/metrics\n",
		srv.URL(), o.server.Policy, len(o.server.Endpoints), o.server.Router.Model, srv.URL())
	// The snapshot listener takes the public listener's timeouts, their
	// zero values the same defaults.
	readHeader, idle := o.server.ReadHeaderTimeout, o.server.IdleTimeout
	if readHeader == 0 {
		readHeader = gateway.DefaultReadHeaderTimeout
	}
	if idle == 0 {
		idle = gateway.DefaultIdleTimeout
	}
	snap, err := serveSnapshot(o.snapshotListen, srv.Router(), readHeader, idle, srv.Registry(), log)
	if err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return err
	}
	if snap != nil {
		fmt.Fprintf(stdout, "gateway: index snapshot for peers at http://%s%s\n", snap.addr, snapshotPath)
	}
	if started != nil {
		started(snap)
	}
	var serveErr, snapErr error
	select {
	case <-ctx.Done():
	case <-srv.Done(): // the listener failed on its own (logged by the Server)
		serveErr = srv.Err()
	case <-snap.stopped(): // nothing stops it before the shutdown below but its own failure (logged)
		snapErr = snap.err
	}
	if serveErr == nil && snapErr == nil && o.drainTimeout > 0 {
		serveErr, snapErr = drainWindow(srv, snap, o.drainTimeout, log)
	}
	log.Info("shutting down", "timeout", o.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	// Both listeners stop accepting now and their requests share the
	// timeout: a peer's snapshot transfer must not keep the public listener
	// accepting, nor eat into its requests' time. Shutdown closes the
	// router, which writes the final checkpoint; a transfer still running
	// goes on reading the index, which stays readable once closed.
	snapDone := make(chan struct{})
	go func() {
		defer close(snapDone)
		snap.shutdown(sctx)
	}()
	err = srv.Shutdown(sctx)
	<-snapDone
	if serveErr != nil {
		return fmt.Errorf("gateway: serving on %s: %w", srv.Addr(), serveErr)
	}
	if snapErr != nil {
		return fmt.Errorf("gateway: serving the index snapshot on %s: %w", snap.addr, snapErr)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// otlpRequested reports whether the environment asks for OTLP export as
// the OTLP build reads it (contrib/otel's otlpenv.Resolve): an OTLP trace
// endpoint named, and neither OTEL_SDK_DISABLED=true nor
// OTEL_TRACES_EXPORTER=none turning export off.
func otlpRequested(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != "" || strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) != ""
}

// maxConfigFile bounds a configuration file; real ones are a few KiB.
const maxConfigFile = 16 << 20

// readYAML reads a YAML (or JSON, a subset of YAML) file and returns it as
// JSON, so that the strict JSON decoding of kvroute applies to it unchanged:
// unknown keys are still errors, durations are still strings ("2s"), and a
// key given twice is an error (YAMLToJSONStrict), not the last one winning;
// so is a file of more than one document, not its first one read alone.
func readYAML(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxConfigFile)
	}
	out, err := yamldoc.ToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// loadConfigFile reads a configuration in YAML or JSON: its "gateway"
// section with the gateway's client limits, and the rest as a router
// configuration (llmd.Load): kvroute's keys with kvroute.LoadConfig's rules
// and llm-d plugin parameters, or an llm-d EndpointPickerConfig whole. It
// returns the llm-d settings not carried over, an error with strict.
func loadConfigFile(path string, strict bool) (kvroute.Config, gatewayConfig, []llmd.Finding, error) {
	data, err := readYAML(path)
	if err != nil {
		return kvroute.Config{}, gatewayConfig{}, nil, err
	}
	section, router, err := splitGatewaySection(data)
	if err != nil {
		return kvroute.Config{}, gatewayConfig{}, nil, err
	}
	gw, err := decodeGatewaySection(section)
	if err != nil {
		return kvroute.Config{}, gatewayConfig{}, nil, err
	}
	cfg, findings, err := llmd.Load(bytes.NewReader(router), llmd.Options{Strict: strict})
	if err != nil {
		return kvroute.Config{}, gatewayConfig{}, nil, err
	}
	return cfg, gw, findings, nil
}
