// Package gateway is kvroute's gateway: an OpenAI- and Anthropic-compatible
// reverse proxy that asks a kvroute.Picker (normally a *kvroute.Router) where
// each inference request should go and forwards it there. Its binary is
// cmd/kvroute-gateway (the command line is the package gateway/gatewaycmd,
// shared with the OpenTelemetry build in the contrib/otel module).
//
// For every POST to /v1/completions, /v1/chat/completions, /v1/messages or
// /v1/responses the Handler
//
//  1. reads the body up to Config.MaxBodyBytes (413 beyond it, 400 for a body
//     that is not a JSON object; one leading UTF-8 byte order mark is read
//     past and dropped from the body, as vLLM's json.loads reads the
//     body's bytes as UTF-8-sig, and a UTF-16 or UTF-32 body, which
//     json.loads detects and decodes, is routed and sent on as the UTF-8
//     JSON it encodes, the copy charged to the body budget; 400 naming the
//     encoding when it is not text in it) within Config.BodyReadTimeout (408 and the
//     connection closed after it), into a buffer that grows as the bytes
//     arrive (a Content-Length sizes none beyond 64 KiB) and is charged to a
//     gateway-wide budget of Config.MaxBodyBytesInFlight until the response
//     ends, as is the copy of a body rewritten for ServerConfig.Models and
//     the copies the exchange mode makes (503 with Retry-After when the
//     budget has no room; a split whose copies find none is prefilled by
//     its decode endpoint instead, before the prefiller is sent anything),
//  2. calls Pick with the body, the inbound header and the model the body
//     names (a model other than Config.Model is taken as a LoRA adapter name,
//     which roots the block keys as vLLM's lora_name does; with
//     ServerConfig.Models, a model other models are, unless an engine's
//     /v1/models lists it as an adapter, with a parent, or Models.Adapters
//     names its base),
//  3. forwards the request unchanged to the chosen endpoint (with
//     Config.TokenizeOnce, a completions request's text prompt is replaced
//     by the token IDs the router rendered, so that the engine does not
//     tokenize it again; see tokenin.go for why only completions qualifies)
//     and copies the response back as it arrives, flushing after every read,
//     so that server-sent events (stream=true) pass through unbuffered,
//  4. calls Decision.FirstChunk when the first response bytes arrive from the
//     engine (its prefill is over) and Decision.Done exactly once when the
//     response ends, fails, or the client goes away (the request context is
//     cancelled, which also cancels the upstream request so that the engine
//     aborts it), then Decision.Release once, on every path, so that a
//     Router reuses the Decision for a later pick (a gateway request
//     allocates none).
//
// Every proxied response carries the debugging headers X-Kvroute-Endpoint
// (the chosen endpoint's ID), X-Kvroute-Prompt-Tokens and
// X-Kvroute-Cached-Tokens (the router's prediction). Errors the gateway itself
// produces use the error shape of the API: Anthropic's {"type":"error",...}
// for /v1/messages and OpenAI's {"error":{...}} otherwise. A response that
// breaks after its header was sent is aborted (http.ErrAbortHandler) so that
// the client sees a truncated stream rather than a clean end.
//
// With ServerConfig.Admission the Router's picks go through an admission
// stage (package admission): the request's objective (HeaderObjective, or
// llm-d's HeaderObjectiveLLMD), fairness ID (HeaderFairnessID, or llm-d's
// HeaderFairnessIDLLMD) and queue
// timeout (HeaderQueueTimeout; malformed: 400 naming it) decide its priority
// band, flow and queue deadline. A shed request, or one a full queue
// refuses, is answered 429 with Retry-After (result "shed"); one that found
// no free endpoint before its deadline 503 with Retry-After (result
// "no_endpoint"); HeaderAdmission names the reason. Every pick, first chunk
// and end wakes the queue (Controller.Notify). ServerConfig.EngineMetrics
// adds the engines' scraped saturation (package enginemetrics) to kvroute's
// own accounting.
//
// With ServerConfig.Disagg the Router's profile step is package disagg's
// prefill/decode Profile: each request goes to a decode endpoint and, when
// the decider splits it, the request names its prefill endpoint (the
// host:port of its Address, else its ID: disagg.PrefillerHostPort) in
// x-prefiller-host-port (disagg.HeaderPrefiller) and, with the same value,
// llm-d's current x-llm-d-prefiller-host-port (disagg.HeaderPrefillerLLMD)
// for the decode pod's routing sidecar, and the response in
// HeaderPrefillEndpoint; a client's own values of either are never
// forwarded (with or without Disagg), nor are the other headers llm-d's
// sidecar acts on and the gateway never sets (x-encoder-hosts-ports,
// x-kv-cache-source-host-port, x-data-parallel-host-port, and llm-d's
// x-llm-d- names of the encoders and KV source; a request that carried
// any is counted in kvroute_gateway_client_sidecar_headers_removed_total), nor (unless
// Config.AllowClientKVTransferParams) its own kv_transfer_params, which
// would make vLLM's KV connector pull blocks from the remote_host the
// client names. Only requests of the APIs in the profile's SplitAPIs are
// split (by default completions and chat completions; responses and
// messages added for a sidecar that splits /v1/responses and
// /v1/messages, as kvroute's and llm-d's newer one do).
// With ServerConfig.DisaggHost
// in DisaggModeExchange the gateway runs the two-step exchange itself
// (package disagg/sidecar's Exchange, on completions, chat completions,
// Responses and Messages): it asks the
// prefill endpoint for one
// token (max_output_tokens 1 on /v1/responses) with kv_transfer_params
// for a remote decode, ends the prefill
// role's accounting at that answer, and forwards the request to the decode
// endpoint with the transfer parameters the prefiller returned. A prefill
// step that fails (unreachable, past DisaggHost.Exchange.PrefillTimeout, a bad answer)
// sends the request as it came, for a local prefill, counted by reason and
// named in HeaderPrefillFallback; a decode endpoint that answers a 5xx
// after the prefill step (a failed KV transfer under vLLM's
// kv_load_failure_policy "fail") gets the request once more without the
// transfer parameters (FallbackDecodeFailed).
// ServerConfig.LoRA adds package lora's adapter-affinity scorer to the
// Router: a request whose model names an adapter goes preferably to an
// engine running it (its vllm:lora_requests_info, scraped by the same
// enginemetrics Scraper, with ServerConfig.EngineMetrics' settings or the
// defaults). An engine whose metrics cannot be scraped is scored neutral
// (kvroute_lora_candidates_total{state="unknown"}) and still routed to by
// load; an adapter no engine serves is forwarded and the engine's 404 goes
// back to the client.
// ServerConfig.Approximate, enabled, keeps package approx's approximate
// prefix index for the endpoints whose KV events are not live, each sized
// to its engine's own capacity: the same Scraper reads vLLM's
// vllm:cache_config_info (every CapacityScrapeInterval when nothing else
// reads the scrapes). An engine whose metrics cannot be read is sized to
// the configured capacity, counted in
// kvroute_approx_capacity_fallbacks_total and named on StatusPath and
// /ready.
//
// With ServerConfig.Session (package session) a request's session header,
// llm-d's llm-d-session cookie or, opt-in, its conversation's opening keys
// it to the endpoint of the session's last turn, weighed against load; the
// response to a request without a key carries llm-d's Set-Cookie naming the
// endpoint that answered (beside the engine's cookies), and a malformed key
// is skipped and counted, or answered 400 under strict.
//
// Unless Options.Transport is given, the Handler reaches the engines with
// kvroute's own HTTP/1.1 keep-alive client (internal/h1pool, which the
// render client uses too): the request is written and the response read on
// the handler's goroutine (net/http's Transport passes each through a
// reader and a writer goroutine per connection, which at hundreds of
// concurrent requests costs the gateway more CPU than its own work, and
// closes a connection whose writer goroutine reports late on a CPU-starved
// machine), up to Config.MaxIdleConnsPerHost idle connections per engine,
// each checked for a close by the engine before reuse, warmed ahead to the
// gateway's peak of requests in flight and kept at that peak however long
// they are idle (closing them only had them dialed again); the peak decays
// after a quiet spell, and an engine removed from the endpoints loses its
// connections at once. Engines named by an https Address go through a
// net/http Transport.
//
// POST GeneratePath, vLLM's token-in /inference/v1/generate, is routed by
// the token IDs, multimodal features and cache salt of its body, without
// rendering, and forwarded unchanged. A body whose features vLLM refuses
// (modalities or counts of mm_hashes and mm_placeholders that do not match,
// placeholders that are empty, overlap or end past the prompt,
// metadata-only items without ec_transfer_params, requires_kv without a
// well-formed kv_handoff) is answered 400 and counted as bad_request. A body that gives its multimodal items as
// raw media in content_parts (an image_url, audio_url or video_url part,
// which the engine fetches, expands into placeholders within token_ids and
// hashes itself) is routed by load alone and forwarded unchanged: from its
// first item on the engine's tokens and block keys are not the body's,
// and the body does not say where that item is. The router counts it in
// kvroute_router_cache_blind_total{reason="raw_media"}.
//
// GET /v1/models (also with a trailing slash, forwarded without it) is
// forwarded to the endpoints in turn without a routing decision, its
// outcomes counted under api "models", as is a
// browser's CORS preflight (OPTIONS with Origin and
// Access-Control-Request-Method) of an inference route, /v1/models or
// /v1/messages/count_tokens, which the engine's CORS policy (vLLM's
// --allowed-origins) answers, its outcomes counted under api "preflight". POST
// /v1/messages/count_tokens, vLLM's Anthropic token count (it renders the
// prompt and runs nothing, so there is no cache to route by), goes to the
// endpoints serving the body's model in turn, without a routing decision or
// load, its body read and budgeted as an inference body is, its errors in
// Anthropic's shape and its outcomes counted under api "count_tokens".
//
// Server bundles a Handler, a Router, a Prometheus registry
// (/metrics) and /health behind an http.Server with graceful shutdown; it is
// what the kvroute-gateway binaries and the end-to-end suite (e2e) run. It closes a client connection
// whose request header takes longer than ServerConfig.ReadHeaderTimeout
// (10 s by default) or that waits idle between requests longer than
// ServerConfig.IdleTimeout (2 min). RoundRobin is a cache-blind Picker for
// comparisons.
//
// Metrics (on Options.Registerer): kvroute_gateway_requests_total{api,result}
// (the results body_budget and body_timeout count the bodies refused for the
// budget and the timeout, client_stalled the responses cut because their
// client read nothing for Config.ResponseWriteTimeout; bad_request also counts a method other than POST
// on an inference route, a CORS preflight aside; upstream_unreachable, upstream_timeout,
// upstream_closed and upstream_error count the 502s by the kind of the
// engine's failure, which the client is told in a fixed text while the
// error itself, naming the engine's address, goes to the log only;
// upstream_broken counts the responses that broke off mid-body, which
// kvroute_gateway_upstream_broken_total{kind} splits into closed, timeout
// and other), kvroute_gateway_upstream_resends_total (requests sent to
// an engine a second time, on a new connection, because it closed the
// reused keep-alive connection before answering; 0 with
// Options.Transport), kvroute_gateway_unrouted_requests_total (a 404 for
// any other path), kvroute_gateway_method_not_allowed_total{path} (a 405,
// with Allow: GET, HEAD, for another method on /v1/models, /health,
// /ready, /metrics or the status page, as vLLM answers POST /v1/models;
// the inference routes answer 405 with Allow: POST, counted as
// bad_request), kvroute_gateway_pick_duration_seconds{api} (the routing
// decision, render call included, timed from after the body is read: the
// upload is the client's time), kvroute_gateway_first_chunk_seconds{api}
// (request received to first upstream response bytes: render, routing and
// the engine's time to first token),
// kvroute_gateway_request_body_bytes_in_flight and
// kvroute_gateway_status_truncated_total (latest-request records whose
// client request ID or model was cut to 256 bytes); a Server adds
// kvroute_gateway_header_timeouts_total and
// kvroute_gateway_refused_requests_total (requests net/http refused before
// any handler: a malformed request line or header, a header over the size
// limit). A nil Registerer registers
// nothing. New registers every collector of the component through
// Set.Register, all or none (New fails and leaves nothing registered). Close
// unregisters exactly what New registered, so a closed component can be
// built again on the same registry. (A Server serves a registry of its own,
// built anew by each NewServer.)
package gateway
