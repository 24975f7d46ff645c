// Command kvroute-gateway is kvroute's gateway: an OpenAI- and
// Anthropic-compatible reverse proxy that routes every inference request with
// a kvroute.Router to the vLLM (or SGLang) endpoint holding the longest
// cached prefix of its prompt, falling back to the least-loaded endpoint.
//
// Usage:
//
//	kvroute-gateway --endpoints 10.0.0.7:8000,10.0.0.8:8000 --model Qwen/Qwen3-32B
//	        [--listen :8080] [--events-port 5556] [--replay-port 5559]
//	        [--config router.yaml] [--endpoints-file endpoints.yaml]
//	        [--policy precise|round-robin] [--max-body-bytes 33554432]
//	        [--shutdown-timeout 30s] [--drain-timeout 0s] [--log-level info]
//	        [--checkpoint /var/lib/kvroute/index.ckpt] [--checkpoint-interval 1m]
//	        [--peers http://10.0.0.5:9091/kvroute/snapshot,...] [--peer-token T]
//	        [--snapshot-listen 10.0.0.4:9091]
//
// --model is required with the precise policy: it is the base model name the
// engines serve, which roots every block key (a request naming another model
// is routed as a LoRA adapter of that name).
//
// Each endpoint is the ip:port of an engine's inference port, the identity
// its KV events carry (topic kv@<ip:port>@<model>). The router subscribes to
// each engine's KV events at <ip>:--events-port (vLLM --kv-events-config
// "endpoint") with replay at <ip>:--replay-port ("replay_endpoint"; 0
// disables replay), and tokenizes requests through the engines' render
// routes, so the engines must run with --enable-scale-out. --endpoints-file
// reads a YAML or JSON list instead, which may carry labels for the events
// selector:
//
//	[{"id": "10.0.0.7:8000", "labels": {"zone": "a"}}, {"id": "10.0.0.8:8000"}]
//
// --checkpoint keeps a complete index across restarts: the router loads the
// file at start (a missing, truncated, corrupt or incompatible file is
// logged, counted in kvroute_index_restore_total, kept as <file>.rejected,
// and the gateway starts empty), rewrites it every --checkpoint-interval
// and at shutdown, and every KV-event stream resumes from the file's
// positions. The file is one router's: a path another gateway or picker
// holds (a shared volume) is refused at start, naming it. --peers makes a new replica load the first reachable peer's
// index instead (tried before the file); --snapshot-listen serves this
// gateway's index at /kvroute/snapshot for such peers. Put it on an
// internal address, never the public listener, and set --peer-token (or
// $KVROUTE_PEER_TOKEN, or the config's bootstrap.token; the flag wins, then
// the variable) on both sides; a token no HTTP request carries intact (a
// trailing newline) is an error naming where it was set. Should that
// listener fail while the gateway runs, the gateway shuts down and exits
// non-zero, as it does when its public listener fails. It takes the public
// listener's readHeaderTimeout and idleTimeout, and counts a connection
// closed for a late header in kvroute_gateway_snapshot_header_timeouts_total
// and a request its HTTP server refused unread in
// kvroute_gateway_snapshot_refused_requests_total.
//
// --config is a kvroute router configuration in YAML (as kept in Helm values)
// or JSON, or an llm-d EndpointPickerConfig whole. It is read by llmd.Load,
// with kvroute.LoadConfig's rules: kvroute.DefaultConfig's values for absent
// keys, unknown keys and keys given twice rejected with their path, a file
// (this one or --endpoints-file) of more than one YAML document refused,
// durations as Go duration strings ("2s"; a bare number is an error), and
// llm-d's plugins and parameters translated where kvroute implements them
// (see the README's mapping table); every other llm-d setting is logged at
// start, one line each, or with --strict-config refused:
//
//	model: Qwen/Qwen3-32B
//	speculative: {ttl: 2s}
//	prefix-cache-affinity-filter:
//	  maxTTFTPenaltyMs: 18000
//
// The --model, --events-port and --replay-port flags override it when given.
//
// The file's "gateway" section, read by the same rules, holds the limits the
// gateway puts on its clients (the values shown are the defaults):
//
//	gateway:
//	  maxBodyBytes: 33554432          # larger bodies get 413; --max-body-bytes overrides it
//	  maxBodyBytesInFlight: 536870912 # bytes all bodies in flight may hold; past it 503 + Retry-After
//	  readHeaderTimeout: 10s          # a request header must arrive within it, or the connection closes
//	  bodyReadTimeout: 30s            # the whole body must arrive within it after the header, or 408
//	  responseWriteTimeout: 1m        # a client that reads none of its response for this long is cut off
//	  idleTimeout: 2m                 # a keep-alive connection may wait this long for its next request
//
// Bodies are buffered as their bytes arrive, so maxBodyBytesInFlight bounds
// what clients have sent, not what their Content-Length announces; a body is
// charged until its response ends. A body refused for the budget or the
// timeout is counted in kvroute_gateway_requests_total with the result
// body_budget or body_timeout (a response cut for a stalled client with
// client_stalled), a connection closed for a late header in
// kvroute_gateway_header_timeouts_total, and
// kvroute_gateway_request_body_bytes_in_flight shows the budget in use.
//
// Routes: POST /v1/completions, /v1/chat/completions, /v1/messages and
// /v1/responses are routed and proxied, streaming responses (server-sent
// events) pass through as they arrive; GET /v1/models is forwarded to an
// endpoint; GET /metrics serves the router's and the gateway's Prometheus
// metrics (llm_d_epp_prefix_predicted_cached_tokens, render durations and
// failures, index and event counters, kvroute_gateway_requests_total ...);
// GET /health answers 200 while there are endpoints. Another method on one
// of these paths (POST /v1/models) is answered 405 with Allow, as vLLM
// answers it, and an unknown path 404. Each proxied response
// names the chosen endpoint in the X-Kvroute-Endpoint header, with the
// router's prediction in X-Kvroute-Prompt-Tokens and X-Kvroute-Cached-Tokens.
//
// SIGINT or SIGTERM stops the gateway gracefully: it stops accepting, lets
// requests in flight finish for up to --shutdown-timeout, then cuts them and
// closes the router. With --drain-timeout (0 by default) a drain window
// comes first: /ready answers 503 "shutting down" at once while the gateway
// goes on serving for that long, closing each connection after its
// response, so that the Service or load balancer stops sending it requests
// (and clients reconnect elsewhere) before it stops accepting; in
// Kubernetes, set terminationGracePeriodSeconds above the two timeouts
// together, with a few seconds more when --checkpoint is set, for the
// final checkpoint written as the router closes. The proxy itself lives in the importable package
// github.com/kvroute/kvroute/gateway, and the command line in
// github.com/kvroute/kvroute/gateway/gatewaycmd.
//
// This binary traces nothing; a client's traceparent reaches the engine
// unchanged. The same gateway with OpenTelemetry export over OTLP (gRPC or
// HTTP, configured by the SDK's OTEL_* variables) is the build of
// kvroute-gateway in the contrib/otel module, which keeps the exporters' gRPC dependency out of the
// core module. When OTEL_EXPORTER_OTLP_ENDPOINT is set this binary logs once
// that it does not export and names that one.
package main
