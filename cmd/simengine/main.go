package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kvroute/kvroute/internal/cliflag"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
)

func main() {
	cliflag.Exit("simengine", run(os.Args[1:]))
}

// options are the command-line flags.
type options struct {
	cfg          server.Config
	host         string
	port         int
	kvConfig     string
	logLevel     string
	loras        string
	extraModels  string
	servedNames  servedNames
	maxLoRAs     int
	loraLoadTime time.Duration
	hybrid       hybridFlags
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("simengine", flag.ContinueOnError)
	fs.StringVar(&o.cfg.Model, "model", "sim-model", "served model name without --served-model-name; with it, the model's path (the root of its /v1/models cards), as vLLM's --model")
	fs.Var(&o.servedNames, servedNameFlag, "names the model is served under (vLLM --served-model-name): the first replaces --model, the others are aliases on the same engine and cache, answered with the first name; as vLLM takes them (--served-model-name a b), comma- or space-separated in one value, or the flag repeated")
	fs.StringVar(&o.host, "host", "127.0.0.1", "HTTP listen host")
	fs.IntVar(&o.port, "port", 8000, "HTTP listen port (0 picks a free one)")
	fs.IntVar(&o.cfg.Engine.BlockSize, "block-size", kvindex.DefaultBlockSize, "tokens per KV block")
	fs.IntVar(&o.cfg.Engine.NumGPUBlocks, "num-gpu-blocks", simengine.DefaultNumGPUBlocks, "KV-cache capacity in blocks (vLLM --num-gpu-blocks-override)")
	fs.BoolVar(&o.cfg.Engine.NullBlock, "null-block", false, "hold one of the --num-gpu-blocks out of use as vLLM's null block, so vllm:kv_cache_usage_perc divides by num-gpu-blocks - 1 as vLLM's does (default off: every block usable)")
	fs.IntVar(&o.cfg.Engine.MaxNumBatchedTokens, "max-num-batched-tokens", simengine.DefaultMaxNumBatchedTokens, "token budget of one scheduler step (chunked prefill)")
	fs.IntVar(&o.cfg.Engine.MaxNumSeqs, "max-num-seqs", simengine.DefaultMaxNumSeqs, "maximum running requests (vLLM --max-num-seqs); the others wait in arrival order")
	fs.IntVar(&o.cfg.MaxModelLen, "max-model-len", 0, "maximum prompt + output tokens (0 = KV-cache capacity)")
	fs.StringVar(&o.kvConfig, "kv-events-config", "", fmt.Sprintf(`vLLM KVEventsConfig JSON, e.g. '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:%d","replay_endpoint":"tcp://*:%d"}' (the ports kvroute's gateway subscribes to by default)`,
		kvevents.DefaultEventsPort, kvevents.DefaultReplayPort))
	fs.StringVar(&o.cfg.KVEventsFormat, "kv-events-format", "current", `KV-event wire layout: "current" (map events, vLLM >= v0.26) or "legacy" (array events)`)
	fs.BoolVar(&o.cfg.EnableScaleOut, "enable-scale-out", false, "register the /render routes (vLLM v0.30 --enable-scale-out)")
	fs.BoolVar(&o.cfg.EnableRequestIDHeaders, "enable-request-id-headers", false, "answer every response with an X-Request-Id header: the request's, or a random one (vLLM --enable-request-id-headers)")
	fs.StringVar(&o.loras, "lora-modules", "", "comma-separated LoRA adapter names served on top of --model")
	fs.BoolVar(&o.cfg.EnableTowerConnectorLoRA, "enable-tower-connector-lora", false, "identify a multimodal item of a request with an adapter as lora_name:mm_hash in its blocks' keys (vLLM --enable-tower-connector-lora)")
	fs.BoolVar(&o.cfg.AllowRuntimeLoRAUpdating, "allow-runtime-lora-updating", false, "serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING)")
	fs.StringVar(&o.extraModels, "extra-models", "", "comma-separated further models this address serves, each by an engine of its own publishing on kv@<ip:port>@<model> (the --kv-events-config topic must be kv@<ip:port>@<--model>)")
	fs.IntVar(&o.maxLoRAs, "max-loras", 0, "LoRA adapter slots (vLLM --max-loras): a batch uses at most this many adapters, loading one evicts the least recently used; 0 = adapters always loaded, no slots modelled")
	fs.DurationVar(&o.loraLoadTime, "lora-load-time", simengine.DefaultLoRALoadTime, "time a step stalls to load an adapter into a slot (with --max-loras)")
	fs.Float64Var(&o.cfg.Engine.PrefillTokensPerSecond, "prefill-tokens-per-second", simengine.DefaultPrefillTokensPerSecond, "compute speed: cost of each scheduled token")
	fs.DurationVar(&o.cfg.Engine.DecodeStep, "decode-step", simengine.DefaultDecodeStep, "fixed duration of one scheduler step")
	fs.Float64Var(&o.cfg.Engine.TimeScale, "time-scale", 1, "multiplies every step duration (0.1 = ten times faster)")
	fs.IntVar(&o.cfg.DefaultMaxTokens, "default-max-tokens", server.DefaultMaxTokens, "output tokens when a request sets no limit")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&o.cfg.SnapshotUnavailableFor, "kv-snapshot-unavailable-for", 0, `answer KV-cache snapshot requests (--kv-events-config "snapshot_endpoint") with "unavailable, retry later" for this long after start`)
	fs.StringVar(&o.cfg.PD.Role, "pd-role", server.RoleBoth, `role in prefill/decode disaggregation: "both" (ignores kv_transfer_params), "prefill" (answers do_remote_decode with kv_transfer_params naming itself) or "decode" (reads the named prefiller's blocks for do_remote_prefill)`)
	fs.StringVar(&o.cfg.PD.EngineID, "pd-engine-id", "", "remote_engine_id a prefiller reports (default: random)")
	fs.StringVar(&o.cfg.PD.AdvertiseHost, "pd-advertise-host", "", "remote_host a prefiller reports (default: the listen host)")
	fs.DurationVar(&o.cfg.PD.TransferTimePerToken, "kv-transfer-time-per-token", server.DefaultTransferTimePerToken, "simulated KV read time per prompt token on a decoder (scaled by --time-scale)")
	fs.DurationVar(&o.cfg.PD.TransferTimeout, "kv-transfer-timeout", server.DefaultTransferTimeout, "bound on a decoder's read from a prefiller")
	fs.DurationVar(&o.cfg.PD.LeaseTTL, "kv-lease-ttl", server.DefaultLeaseTTL, "how long a prefiller keeps a finished request's blocks readable (vLLM VLLM_NIXL_ABORT_REQUEST_TIMEOUT)")
	fs.StringVar(&o.cfg.PD.KVLoadFailurePolicy, "kv-load-failure-policy", server.PolicyRecompute, `decoder on a failed read: "recompute" the missing tokens or "fail" the request (vLLM kv_load_failure_policy)`)
	o.hybrid.register(fs)
	if err := cliflag.Parse(fs, spreadServedNames(args), os.Stdout); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	loadTimeSet := false
	fs.Visit(func(f *flag.Flag) { loadTimeSet = loadTimeSet || f.Name == "lora-load-time" })
	if loadTimeSet && o.maxLoRAs == 0 {
		// Without slots every adapter stays loaded: the time would be ignored.
		return nil, errors.New("--lora-load-time needs --max-loras (without adapter slots no adapter is ever loaded)")
	}
	kv, err := server.ParseKVEventsConfig(o.kvConfig)
	if err != nil {
		return nil, err
	}
	o.cfg.KVEvents = kv
	if len(o.servedNames) > 0 {
		// As vLLM: --model is then the weights' path, the root of the
		// base model's cards, and the first served name is the model's.
		o.cfg.ModelPath, o.cfg.Model = o.cfg.Model, o.servedNames[0]
		if len(o.servedNames) > 1 {
			o.cfg.ServedModelAliases = o.servedNames[1:]
		}
	}
	if o.loras != "" {
		o.cfg.LoRAModules = splitNames(o.loras)
	}
	if o.extraModels != "" {
		o.cfg.ExtraModels = splitNames(o.extraModels)
	}
	if o.cfg.Engine.Hybrid, err = o.hybrid.config(); err != nil {
		return nil, err
	}
	if o.maxLoRAs != 0 {
		o.cfg.Engine.LoRA = &simengine.LoRAConfig{MaxLoRAs: o.maxLoRAs, LoadTime: o.loraLoadTime}
	}
	return o, nil
}

// splitNames reads a comma-separated list of names, without the spaces
// around each; an empty name is kept, for server.New to refuse by name.
func splitNames(v string) []string {
	names := strings.Split(v, ",")
	for i, n := range names {
		names[i] = strings.TrimSpace(n)
	}
	return names
}

func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	lg := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	srv, err := server.New(o.cfg, server.Options{Logger: lg})
	if err != nil {
		return err
	}
	if err := srv.Start(net.JoinHostPort(o.host, strconv.Itoa(o.port))); err != nil {
		_ = srv.Close()
		return err
	}
	ec := srv.Engine().Config()
	lg.Info("simengine serving", "http", "http://"+srv.Addr(), "model", o.cfg.Model, "aliases", o.cfg.ServedModelAliases,
		"blockSize", ec.BlockSize, "numGPUBlocks", ec.NumGPUBlocks, "scaleOut", o.cfg.EnableScaleOut,
		"kvEvents", srv.KVEventsEndpoint(), "replay", srv.ReplayEndpoint(), "snapshot", srv.SnapshotEndpoint(),
		"format", o.cfg.KVEventsFormat, "pdRole", o.cfg.PD.Role)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	signal.Stop(sig)
	lg.Info("simengine shutting down")
	start := time.Now()
	err = srv.Close()
	lg.Info("simengine stopped", "took", time.Since(start))
	return err
}
