// Command kvroute-epp is kvroute as the endpoint picker of a Gateway API
// Inference Extension InferencePool: an Envoy ext_proc server that routes each
// request to the cache-warm vLLM pod by kvroute's precise prefix-cache index,
// with the pool's pods discovered from the Kubernetes API.
//
// Flags follow the Inference Extension's reference picker where they mean the
// same (--grpc-port 9002, --grpc-health-port 9003, --metrics-port 9090,
// --pool-name, --pool-namespace, --pool-group, --zap-encoder console|json for
// the log format), so that the Inference Extension's own picker manifests
// start it. Of the upstream picker's other flags, --health-checking,
// --zap-log-level, --cert-path and --enable-cert-reload are honoured;
// --endpoint-target-ports (without --endpoint-selector), --zap-devel,
// --zap-stacktrace-level and
// --zap-time-encoding are accepted and ignored, each logged once at start
// with why; the earlier full picker's scheduler and scraping flags are
// refused as unknown (see flags.go). kvroute's router is configured with --config (YAML or JSON;
// durations are strings such as "2s"; the
// parameters of the llm-d router's precise-prefix-cache-producer,
// prefix-cache-affinity-filter and token-load-scorer plugins may be pasted
// under their plugin type names, see package llmd) and --model. Without --pool-name, --endpoints gives a static list of
// "ip:port" engines (no Kubernetes needed), checked as the kvroute
// gateway's --endpoints: an entry given twice, or a list with none,
// refuses to start. --render-selector discovers a
// separate render pool (vLLM renderers in front of an SGLang fleet).
// --checkpoint keeps the index across restarts: the picker starts with the
// index it had, and resumes each engine's event stream where it left off.
// The file is one router's: a path another picker or gateway holds (a
// shared volume) is refused at start, naming it (see package checkpoint).
//
//	kvroute-epp --pool-name vllm-pool --pool-namespace llm --model meta-llama/Llama-3.1-8B-Instruct
//
// The picker reports readiness (gRPC health services "readiness",
// envoy.service.ext_proc.v3.ExternalProcessor and "") once endpoint discovery
// has synced, it has at least one endpoint, and the router's index has caught
// up: every endpoint's KV-event stream is live or has been given up on
// (readiness.giveUpAfter in --config). It checks every --readiness-interval
// and follows the router from then on: an endpoint that joins and has not
// caught up makes it not ready again. Liveness does not wait. The metrics
// port also serves the same readiness over HTTP (/ready: 200, or 503 with
// the reason; without endpoints, why discovery found none: "no endpoints:
// k8s: InferencePool CRD inference.networking.k8s.io/v1 not installed", the
// pool not found or being deleted; while discovery waits for its caches,
// the API server's last refusal of a list or watch, such as an RBAC
// forbidden) and a status page (/debug/kvroute) with every endpoint's
// KV-event stream and load and the latest requests. Like the kvroute
// gateway's listener, it closes a connection whose request header has not
// arrived within gateway.DefaultReadHeaderTimeout (10 s; over TLS, the
// handshake too), counted in kvroute_epp_metrics_header_timeouts_total, and
// a keep-alive connection idle for gateway.DefaultIdleTimeout (2 min); a
// request its HTTP server refuses unread (a malformed request line or
// header, plain HTTP on its TLS port) is counted in
// kvroute_epp_metrics_refused_requests_total. Both gRPC servers
// refuse a connection's streams past --grpc-max-concurrent-streams (default 0,
// unlimited: Envoy opens one ext_proc stream per request in flight), accept
// keepalive pings, with or without a stream open, no more often than
// --grpc-keepalive-min-time (5s), and close a connection with no stream open
// for --grpc-max-connection-idle (15m) with a graceful GOAWAY.
// ext_proc is served over TLS (--secure-serving, on by default as in the
// Inference Extension's picker, whose manifests rely on it), with
// --cert-path's tls.crt and tls.key or a self-signed certificate made at
// start; the health port stays plaintext. --secure-serving=false serves
// h2c, as kvroute's own chart and plain manifests ask (their Services
// announce appProtocol http2).
// --enable-cert-reload reads --cert-path's pair, and --metrics-cert-dir's,
// again every 10 s and serves a changed pair from the next handshake (a
// rotated Kubernetes TLS secret is updated in place); a changed pair that
// does not load is logged, counted in
// kvroute_epp_cert_reloads_total{server="ext_proc"|"metrics",result="invalid"}
// and refused, the previous certificate kept.
//
// kvroute-epp also takes the llm-d router EPP's flags, so that llm-d's
// router chart starts it with the args it renders (llmdserver.go):
// --config-file is --config; --metrics-endpoint-auth (default true, as
// llm-d's) has each caller of the metrics port's /metrics, status page and
// /debug/pprof/ (--enable-pprof, default true) present a Kubernetes bearer
// token that a TokenReview authenticates and a SubjectAccessReview allows
// (verb get on the path): 401 without or with a refused token, 403 when not
// allowed, 503 when the API server fails or takes over 5 s; decisions are
// cached by an HMAC of the token, never the token (allowed for
// --metrics-auth-allow-ttl, 1 min, refused for --metrics-auth-deny-ttl,
// 10 s, a refused token whatever the path; at most
// --metrics-auth-cache-entries, 4096, where a new decision evicts the
// oldest denial so that a stream of unknown tokens does not push the
// scrapers' allowances out: counted in
// kvroute_epp_metrics_auth_cache_full_total, lookups in
// kvroute_epp_metrics_auth_cache_total), and at most
// --metrics-auth-max-in-flight (8) reviews are asked at once, callers
// missing the cache on one token and path while its review is in flight
// sharing it (one that leaves meanwhile is counted as canceled in
// kvroute_epp_metrics_auth_total): a caller not
// cached beyond them is answered 503 with Retry-After unreviewed, counted
// as busy there, so that a caller sending
// unknown tokens cannot make the picker flood the API server. Reviews are
// also started at most --metrics-auth-review-rate (2) a second, twice that
// at once: a caller over it is answered 503 unreviewed too, counted as
// throttled, at once rather than queued by client-go ahead of the
// scrapers' reviews: they go through a Kubernetes client of their own,
// limited to what the rate lets through (two requests a review, at the
// rate and at once) instead of client-go's default 5 requests a second.
// /ready stays open, as the kubelet probes it without a token. With
// --endpoints kvroute-epp has no Kubernetes client, so there the flag
// defaults to false and true is an error. --metrics-cert-dir serves the
// metrics port over TLS with its tls.crt and tls.key, read at start and,
// with --enable-cert-reload, again as they change, as llm-d watches them;
// --metrics-client-ca-file requires a client certificate it verifies.
// --drain-timeout (30s) keeps ext_proc serving that long after SIGTERM
// once health reports NOT_SERVING (then kvroute's own
// --shutdown-timeout, 10s, lets ext_proc's streams in flight finish and
// --metrics-shutdown-timeout, 5s, the metrics port's requests, before
// each is cut, and with --tracing, --tracing-flush-timeout, 10s, the
// spans still batched, before they are dropped; the pod's grace period
// must cover the four); --grpc-max-recv-msg-size and
// --grpc-max-send-msg-size bound ext_proc's messages, given as quantities
// such as 10MiB or 25MB (default grpc-go's: 4MiB received, no bound sent);
// --tls-min-version and --tls-cipher-suites apply to --secure-serving.
// --v sets the log level when neither --log-level nor --zap-log-level is
// given: 4 (llm-d's DEBUG) and above debug, below info, as kvroute-epp
// has no finer levels. --ha-enable-leader-election,
// --disable-endpoint-subset-filter, --emit-endpoint-scores,
// --refresh-metrics-interval, --refresh-prometheus-metrics-interval,
// --metrics-staleness-threshold, --enable-grpc-stream-metrics,
// --plugin-state-staleness-threshold, --fairness-id-metric-label-limit and
// --allow-experimental-plugins are checked, accepted and logged once at
// start as ignored, with why; in particular every replica is ready, not
// only a leader, since each routes from its own index.
//
// --fallbacks N names the N next best endpoints after the pick (protocol
// v0.4.0), for an Envoy retry policy to try in order; when Envoy reports that
// a fallback served, the request's load moves there.
// --conformance-test-hooks turns on the Inference Extension conformance
// suite's test hooks (off by default; never on a production cluster).
// --observe-cached-tokens reads the cached prompt tokens vLLM reports in each
// successful response's usage (started with --enable-prompt-tokens-details)
// from the response body chunks Envoy sends the picker, and hands them to the
// router's accuracy loop (kvroute_router_prediction_*,
// kvroute_router_endpoint_inaccurate, the resync of a persistently wrong
// endpoint's events); kvroute_extproc_usage_total counts what was read.
// --allow-client-kv-transfer-params passes on the kv_transfer_params of a
// client's body, which the picker otherwise removes (vLLM's KV connector
// would pull blocks from the remote_host the client names).
//
// --approximate-config FILE (YAML or JSON, package approx's keys) keeps an
// approximate prefix index for endpoints whose KV events are not live; the
// status page and /ready show every endpoint's cache mode (precise,
// approximate or blind) either way.
//
// --admission-config FILE (YAML or JSON, package admission's keys: objectives
// and their priorities, queue bounds and timeouts, saturation thresholds)
// puts an admission stage in front of every pick; off by default. Requests
// name their objective and fairness ID in the x-gateway-inference-objective
// (alias x-llm-d-inference-objective) and x-gateway-inference-fairness-id
// (alias x-llm-d-inference-fairness-id) headers, and may shorten their queue time with x-kvroute-queue-timeout.
// Refused requests are answered by the picker: 429 with Retry-After (shed,
// queue full), 503 (queue deadline passed, shutting down), the reason in
// x-kvroute-admission and, in llm-d's words, x-llm-d-request-dropped-reason. --engine-metrics-config FILE (package enginemetrics'
// keys) adds the engines' own vLLM queue and KV-cache metrics, scraped from
// each engine's /metrics, to the admission's saturation signal (and sets
// how the LoRA scorer's adapter state is scraped, below); with neither an
// admission stage nor a LoRA scorer it is refused.
//
// --disagg-config FILE (YAML or JSON, package disagg's keys: nonCachedTokens,
// maxPrefillQueueTokens, ...) turns prefill/decode disaggregation on: each
// request's destination is a decode endpoint and, when the decider splits
// it, x-prefiller-host-port names its prefill endpoint for the decode pod's
// routing sidecar. Only requests of the APIs its splitAPIs lists are split
// (default: completions and chat_completions; add responses and
// messages for a sidecar that splits /v1/responses and /v1/messages, as
// llm-d's newer one and kvroute-sidecar do); the others stay local,
// counted in
// kvroute_disagg_decisions_total{reason="api"}. Endpoints take their role
// from the pod label --role-label (default llm-d.ai/role: prefill,
// decode, or both).
//
// --session-config FILE (YAML or JSON, package session's keys: headers,
// cookie, setCookie, derive, strict, ttl, ...; {} for the defaults) turns
// session affinity on: a request's session key (x-session-id,
// x-dynamo-session-id, x-smg-routing-key, llm-d's llm-d-session cookie, or
// derived from the conversation's opening) makes the pick prefer the
// endpoint that served the session's last turn, weighed against its load;
// the endpoint Envoy reports as having served is recorded, a response to a
// request without a key sets llm-d's session cookie, and a malformed key is
// skipped and counted (400 under strict).
//
// --lora-config FILE (YAML or JSON, package lora's keys: weight,
// capPenalty, maxWaiting; {} for the defaults) adds the LoRA
// adapter-affinity scorer to the router's scorers (and, with P/D, to the
// decode pick): a request whose model names an adapter prefers the
// engines whose vllm:lora_requests_info reports it running, then waiting,
// over those that would load it. The engines' /metrics are scraped with
// --engine-metrics-config's settings or, without it, the scraper's
// defaults; an engine whose metrics are not fresh is scored neutral and
// counted in kvroute_lora_candidates_total{state="unknown"}.
//
// An llm-d EndpointPickerConfig given as --config configures these stages
// the llm-d way (package llmd's LoadResult): a disagg-profile-handler (or
// pd-profile-handler) with a prefix-based-pd-decider or
// always-disagg-pd-decider turns P/D on, a session-affinity-scorer or
// session-affinity-filter session affinity, the flowControl feature gate
// the admission stage, and a lora-affinity-scorer the LoRA scorer. Each is
// used unless its own --disagg-config, --session-config,
// --admission-config or --lora-config is given; a stage configured both
// ways refuses to start, naming both. Every configuration file (--config
// and each stage's) is one YAML document: a file of more than one (a
// "---" between two) refuses to start, naming the file, rather than its
// first document being read and the rest dropped unread.
//
// kvroute-epp also takes the llm-d router picker's flags its Helm chart
// passes, so that operators swap the image and keep the arguments:
// --config-file is --config's other name and --config-text gives the same
// configuration inline (one of the three at most). --endpoint-selector
// with --endpoint-target-ports is llm-d's standalone pool: the Ready pods
// of --pool-namespace the label selector matches, on each of the 1 to 8
// ports (a port's place its data-parallel rank), are the endpoints,
// instead of --pool-name's InferencePool.
// --ha-enable-leader-election makes the replicas compete for a
// coordination.k8s.io Lease in --pool-namespace (named as llm-d's picker
// names it, epp-<namespace>-<pool or Deployment>.llm-d.ai, or
// --ha-lease-name) and only its holder ready, so that one picker sees the
// whole load its affinity filter gates on; the others stand by, not ready,
// and a replica shutting down releases the lease. Where llm-d's picker
// exits on losing the lease, kvroute-epp turns not ready at its next
// readiness check (--readiness-interval) and stands by again, keeping its
// index warm for a takeover. A standby's /ready gives that reason, and
// client-go's election lines, logged through klog, are written as
// kvroute-epp's own (--zap-encoder's format, --log-level's level). With a
// cluster block the replicas share
// their state and each may route: the flag is then logged as not needed,
// and still honoured.
//
// --tracing (llm-d's default true) exports spans over OTLP as llm-d's
// picker does: to the collector OTEL_EXPORTER_OTLP_ENDPOINT names (llm-d's
// router chart sets it, with the service name, resource attributes and
// sampler, when its tracing is enabled), over gRPC unless
// OTEL_EXPORTER_OTLP_PROTOCOL says http/protobuf, sampling a tenth of new
// traces unless OTEL_TRACES_SAMPLER says otherwise, a request Envoy or the
// client traced joining that trace. Each routed request is an "extproc
// route" span (the endpoints sent to Envoy, the prefill endpoint of a
// split request, the outcome, the served endpoint, the result) with the
// router's "pick" span (render, keys, index lookup, filter, score) below
// it, and KV-event batches too when the configuration's events tracing
// block turns their sampling on. Without
// an endpoint nothing is exported (llm-d's picker would print spans on
// standard output instead; OTEL_TRACES_EXPORTER=console is refused);
// --tracing=false turns it off whatever the environment says. This is why
// the module requires kvroute's contrib/otel (its otlpenv package, the
// OpenTelemetry SDK and OTLP exporters).
package main
