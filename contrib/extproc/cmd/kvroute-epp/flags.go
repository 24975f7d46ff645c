package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/contrib/extproc"
	"github.com/kvroute/kvroute/contrib/k8s"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/internal/cliflag"
)

// flags are kvroute-epp's command-line flags (parseFlags), the router
// configuration file they name (loadConfig) and their environment defaults.
//
// kvroute-epp stands in for the Gateway API Inference Extension's endpoint
// picker (cmd/lwepp: pkg/lwepp/server's Options, controller-runtime's zap
// flags and --kubeconfig), and takes its flags under their upstream names:
//
//   - honoured: --grpc-port, --grpc-health-port, --metrics-port, --pool-name,
//     --pool-namespace, --pool-group, --kubeconfig, --secure-serving,
//     --health-checking (default true here: kvroute-epp has always served
//     the health service on the ext_proc port; false leaves only ext_proc
//     there), --zap-encoder, --zap-log-level (as --log-level; the last of
//     the two given wins), and the earlier picker's --cert-path and
//     --enable-cert-reload;
//   - honoured, from the llm-d router's picker (its pkg/epp/server
//     Options; llmdflags.go): --config-file (--config's other name),
//     --config-text (the configuration inline), and --endpoint-selector
//     with --endpoint-target-ports (the pool as the pods a label selector
//     matches, on those ports, instead of an InferencePool), and
//     --ha-enable-leader-election (only the holder of a Lease is ready;
//     kvroute's --ha-lease-name names it);
//   - honoured, from the llm-d router's picker: --tracing (default true,
//     as llm-d's): spans exported over OTLP to the collector the standard
//     OTEL_* variables name (tracing.go);
//   - accepted and ignored, each logged once at start with why
//     (upstreamflags.go): --endpoint-target-ports without
//     --endpoint-selector (the ports are the InferencePool's targetPorts
//     or each --endpoints ip:port; upstream does not use it with
//     --pool-name either), --zap-devel,
//     --zap-stacktrace-level and --zap-time-encoding (kvroute-epp's slog
//     lines have no development mode, no stack traces and a fixed time
//     format); their values are checked as upstream checks them;
//   - --secure-serving defaults to true, as upstream's: the Inference
//     Extension's manifests never pass it (its conformance resources, and
//     its chart except under agentgateway, which sets it false), and the
//     gateways they set up speak TLS to the picker (the chart's Istio
//     DestinationRule with insecureSkipVerify), so kvroute-epp serving h2c
//     in their place failed every request. kvroute's own chart and plain
//     manifests, which speak h2c, pass --secure-serving=false;
//   - the llm-d router EPP's flags (llmdserver.go): honoured
//     --config-file (as --config), --metrics-endpoint-auth,
//     --metrics-cert-dir, --metrics-client-ca-file, --enable-pprof,
//     --drain-timeout, --grpc-max-recv-msg-size, --grpc-max-send-msg-size,
//     --tls-min-version, --tls-cipher-suites and --v; accepted, checked
//     and logged once as ignored with why: llmdIgnoredFlags;
//   - refused as unknown: the flags only the earlier, full picker
//     (cmd/epp) had, whose scheduler and metrics scraping kvroute replaces
//     with its own configuration (--model-server-metrics-*, ...), and
//     llm-d's deprecated metric flags (--total-queued-requests-metric and
//     the like, which llm-d refuses too): silently running without what
//     they asked for would be worse than not starting.

// flags holds the parsed command line.
type flags struct {
	grpcPort, healthPort, metricsPort int
	listenHost                        string
	poolName, poolNamespace           string
	poolGroup                         string
	configPath, model                 string
	strictConfig                      bool
	endpoints                         string
	staticEndpoints                   []kvroute.Endpoint // --endpoints parsed and checked
	renderSelector                    string
	renderPort                        int
	kubeconfig                        string
	checkpoint                        string
	eventSelector                     string
	maxBodyBytes                      int64
	maxBodyBytesInFlight              int64
	readinessInterval                 time.Duration
	logLevel                          string
	logEncoder                        string
	fallbacks                         int
	conformanceTestHooks              bool
	observeCachedTokens               bool
	allowClientKVTransferParams       bool
	admissionConfig                   string
	approximateConfig                 string
	engineMetricsConfig               string
	disaggConfig, roleLabel           string
	sessionConfig                     string
	loraConfig                        string
	grpcMaxConcurrentStreams          uint32
	grpcKeepaliveMinTime              time.Duration
	grpcMaxConnectionIdle             time.Duration
	secureServing                     bool
	certPath                          string
	enableCertReload                  bool
	healthChecking                    bool
	stop                              stopTimeouts    // --shutdown-timeout, --metrics-shutdown-timeout, --tracing-flush-timeout (stopservers.go)
	ignored                           []string        // upstream flags given that do not apply (upstreamflags.go)
	llmdFlags                                         // the llm-d router picker's flags (llmdflags.go)
	llmdServer                        llmdServerFlags // the llm-d router EPP's server flags (llmdserver.go)
}

// newFlagSet returns kvroute-epp's flags, each setting its field of f,
// writing its errors to stderr.
func newFlagSet(f *flags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kvroute-epp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&f.grpcPort, "grpc-port", 9002, "ext_proc gRPC port Envoy calls")
	fs.IntVar(&f.healthPort, "grpc-health-port", 9003, "gRPC health service port (liveness, readiness)")
	fs.IntVar(&f.metricsPort, "metrics-port", 9090, "Prometheus /metrics port")
	fs.StringVar(&f.listenHost, "listen-host", "", "address to listen on (empty: all interfaces)")
	fs.StringVar(&f.poolName, "pool-name", "", "InferencePool whose Ready pods are the endpoints")
	fs.StringVar(&f.poolNamespace, "pool-namespace", "", "namespace of the pool and its pods (empty: $POD_NAMESPACE, else $NAMESPACE, which llm-d's router chart sets, else default)")
	fs.StringVar(&f.poolGroup, "pool-group", "inference.networking.k8s.io", "API group of the InferencePool (inference.networking.k8s.io for v1, inference.networking.x-k8s.io for v1alpha2)")
	fs.StringVar(&f.configPath, "config", "", "router configuration file (YAML or JSON): kvroute's keys, or an llm-d EndpointPickerConfig whole")
	fs.BoolVar(&f.strictConfig, "strict-config", false, "refuse to start when the --config file has llm-d settings kvroute does not carry over (default: log each and start)")
	fs.StringVar(&f.model, "model", "", "base model the engines serve (overrides the config's model)")
	fs.StringVar(&f.endpoints, "endpoints", "", "static comma-separated ip:port engines, each given once, instead of --pool-name")
	fs.StringVar(&f.renderSelector, "render-selector", "", "label selector of a separate render pool (pods in --pool-namespace)")
	fs.IntVar(&f.renderPort, "render-port", 8000, "port of the render pool's pods")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (empty: in-cluster)")
	fs.StringVar(&f.eventSelector, "event-selector", "", "Kubernetes label selector of the pods whose KV events are subscribed (default: all endpoints)")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "index checkpoint file: loaded at start, written periodically and on shutdown (overrides the config's checkpoint.path); one router's (locked through <file>.lock: a path another router holds is refused)")
	fs.Int64Var(&f.maxBodyBytes, "max-body-bytes", extproc.DefaultMaxBodyBytes, "request body limit (413 above)")
	fs.Int64Var(&f.maxBodyBytesInFlight, "max-body-bytes-in-flight", 0, fmt.Sprintf("bytes the request bodies of all streams may hold together (503 with Retry-After past it; 0: %d, or --max-body-bytes when larger)", extproc.DefaultMaxBodyBytesInFlight))
	fs.DurationVar(&f.readinessInterval, "readiness-interval", extproc.DefaultReadinessInterval, "how often readiness asks the router whether its index has caught up")
	fs.Func("grpc-max-concurrent-streams", "streams one client connection may have open on each gRPC server; a stream over it is refused (0: unlimited, as grpc-go; the default, since Envoy opens one ext_proc stream per request in flight and, with its Google gRPC client, queues the streams over a connection's limit rather than opening another connection; set it above the requests in flight per Envoy connection)",
		func(s string) error {
			n, err := strconv.ParseUint(s, 10, 32)
			f.grpcMaxConcurrentStreams = uint32(n)
			return err
		})
	fs.DurationVar(&f.grpcKeepaliveMinTime, "grpc-keepalive-min-time", defaultGRPCKeepaliveMinTime, "shortest interval between a client's HTTP/2 keepalive pings the gRPC servers accept, with or without a stream open; a client pinging faster is sent GOAWAY (keep it below Envoy's connection_keepalive interval less its jitter)")
	fs.DurationVar(&f.grpcMaxConnectionIdle, "grpc-max-connection-idle", defaultGRPCMaxConnectionIdle, "how long a gRPC connection with no stream open is kept before it is closed with a graceful GOAWAY (0: forever)")
	fs.BoolVar(&f.secureServing, "secure-serving", true, "serve ext_proc over TLS, as the Inference Extension's picker does by default: with --cert-path's certificate, or a self-signed one made at start (the health port stays plaintext for Kubernetes' gRPC probes); false serves h2c, as kvroute's chart and plain manifests ask")
	fs.StringVar(&f.certPath, "cert-path", "", "with --secure-serving: a directory holding tls.crt and tls.key (a mounted Kubernetes TLS secret); empty: a self-signed certificate")
	fs.BoolVar(&f.enableCertReload, "enable-cert-reload", false, fmt.Sprintf("with --cert-path or --metrics-cert-dir: read their tls.crt and tls.key again every %v and serve a changed pair from the next handshake, as a rotated Kubernetes TLS secret is updated in place; a changed pair that does not load is refused, logged and counted, and the previous one kept", certReloadInterval))
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logEncoder, "zap-encoder", "console", "log line format, under the Inference Extension picker's flag name: console (key=value text) or json")
	fs.IntVar(&f.fallbacks, "fallbacks", 0, fmt.Sprintf("fallback endpoints named after the pick, the next best by score, for Envoy to retry in order (0 to %d; none with the P/D profile)", extproc.MaxFallbacks))
	fs.BoolVar(&f.conformanceTestHooks, "conformance-test-hooks", false,
		"the Inference Extension conformance suite's hooks: the "+extproc.ConformanceSelectionHeader+" request header chooses the candidates and "+
			extproc.ConformanceServedHeader+" reports the served endpoint (test clusters only: any client could steer its requests)")
	fs.BoolVar(&f.observeCachedTokens, "observe-cached-tokens", false,
		"read the engines' reported cached prompt tokens (vLLM --enable-prompt-tokens-details) from every successful response body Envoy sends the picker, and compare them with the router's prediction (the accuracy loop)")
	fs.BoolVar(&f.allowClientKVTransferParams, "allow-client-kv-transfer-params", false,
		"pass on the kv_transfer_params a client's body carries (by default they are removed: a client's do_remote_prefill would make the engine pull KV blocks from the address it names); only behind a trusted component that disaggregates itself")
	fs.StringVar(&f.admissionConfig, "admission-config", "", "admission stage configuration file (YAML or JSON, package admission's keys): queue, prioritize and shed requests under saturation (default: off, every request is picked at once)")
	fs.StringVar(&f.disaggConfig, "disagg-config", "", "prefill/decode disaggregation configuration file (YAML or JSON, package disagg's keys; {} for the defaults): pick a decode endpoint and, when its uncached prompt tokens reach the threshold, a prefill endpoint named in x-prefiller-host-port (default: off, one role)")
	fs.StringVar(&f.roleLabel, "role-label", disagg.DefaultRoleLabel, "pod label giving an endpoint's prefill/decode role, read as llm-d reads llm-d.ai/role: prefill or encode-prefill (prefill only), decode, both, prefill-decode or encode-prefill-decode (both), encode (left out); absent: both")
	fs.StringVar(&f.sessionConfig, "session-config", "", "session affinity configuration file (YAML or JSON, package session's keys; {} for the defaults): a request's session key (x-session-id, x-dynamo-session-id, x-smg-routing-key, the llm-d-session cookie) prefers the endpoint of the session's last turn, weighed against its load; responses to requests without a key set the llm-d-session cookie (default: off)")
	fs.StringVar(&f.approximateConfig, "approximate-config", "", "approximate prefix index configuration file (YAML or JSON, package approx's keys; {\"enabled\": true} turns it on): endpoints whose KV events are not live are routed from the router's own decisions, labelled approximate (default: off, they are routed blind)")
	fs.StringVar(&f.engineMetricsConfig, "engine-metrics-config", "", "engine metrics scraper configuration file (YAML or JSON, package enginemetrics' keys): the admission also reads each engine's vLLM queue and KV-cache metrics, and the LoRA scorer reads its adapters with these settings (needs --admission-config or --lora-config)")
	fs.StringVar(&f.loraConfig, "lora-config", "", "LoRA adapter-affinity scorer configuration file (YAML or JSON, package lora's keys; {} for the defaults): a request for an adapter prefers the engines already running it, as each engine's vllm:lora_requests_info says (scraped with --engine-metrics-config's settings, or the scraper's defaults) (default: off)")
	addStopFlags(fs, &f.stop)
	addUpstreamFlags(fs, f)
	addLLMDFlags(fs, f)
	addLLMDServerFlags(fs, f)
	return fs
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := newFlagSet(&f, stderr)
	if err := cliflag.Parse(fs, args, os.Stdout); err != nil {
		return f, err
	}
	if f.poolNamespace == "" {
		f.poolNamespace = envOr("POD_NAMESPACE", envOr("NAMESPACE", "default"))
	}
	f.ignored = setIgnoredFlags(fs)
	if err := checkLLMDFlags(&f); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		// Parsing stops at the first argument that is not a flag: every
		// flag after it would be ignored.
		return f, fmt.Errorf("unexpected arguments %q (the flags after the first of them would be ignored)", fs.Args())
	}
	if f.logEncoder != "console" && f.logEncoder != "json" {
		return f, fmt.Errorf("--zap-encoder %q is neither console nor json", f.logEncoder)
	}
	if f.readinessInterval <= 0 {
		return f, fmt.Errorf("--readiness-interval %v is not positive", f.readinessInterval)
	}
	if f.grpcKeepaliveMinTime <= 0 {
		return f, fmt.Errorf("--grpc-keepalive-min-time %v is not positive", f.grpcKeepaliveMinTime)
	}
	if f.certPath != "" && !f.secureServing {
		return f, errors.New("--cert-path is for --secure-serving, which is set false")
	}
	if f.enableCertReload && f.certPath == "" && f.llmdServer.metricsCertDir == "" {
		return f, errors.New("--enable-cert-reload reloads --cert-path's and --metrics-cert-dir's certificates; set either too")
	}
	if err := f.stop.check(); err != nil {
		return f, err
	}
	if f.grpcMaxConnectionIdle < 0 {
		return f, fmt.Errorf("--grpc-max-connection-idle %v is negative", f.grpcMaxConnectionIdle)
	}
	if (f.poolName == "" && f.endpointSelector == "") == (f.endpoints == "") {
		return f, errors.New("set exactly one of --pool-name, --endpoint-selector and --endpoints")
	}
	if f.endpoints != "" {
		// Checked as the gateway's --endpoints: a repeated ID would be two
		// candidates of one engine, and a list of separators alone a
		// picker that is never ready.
		eps, err := gateway.ParseEndpoints(f.endpoints)
		if err != nil {
			return f, fmt.Errorf("--endpoints: %w", err)
		}
		f.staticEndpoints = eps
	}
	if f.renderSelector != "" && (f.renderPort < 1 || f.renderPort > 65535) {
		return f, fmt.Errorf("--render-port %d is not a port (1 to 65535)", f.renderPort)
	}
	if f.poolName != "" && f.poolGroup != k8s.PoolV1.Group && f.poolGroup != k8s.PoolV1Alpha2.Group {
		return f, fmt.Errorf("--pool-group %q is neither %s (v1) nor %s (v1alpha2)", f.poolGroup, k8s.PoolV1.Group, k8s.PoolV1Alpha2.Group)
	}
	if err := completeLLMDServerFlags(fs, &f); err != nil {
		return f, err
	}
	return f, nil
}

// envOr returns the environment variable k, or def when it is unset or empty.
func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// loadConfig reads the router configuration (loadConfigResult) without the
// stages beside the router.
func loadConfig(path, model string, strict bool, log *slog.Logger) (kvroute.Config, error) {
	res, err := loadConfigResult(path, model, strict, log)
	return res.Config, err
}
