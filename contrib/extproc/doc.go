// Package extproc is a kvroute endpoint picker for Envoy: a gRPC
// envoy.service.ext_proc.v3.ExternalProcessor server that speaks the Gateway
// API Inference Extension's endpoint-picker protocol, so that any Envoy-based
// gateway serving an InferencePool (Envoy Gateway, Istio, kgateway, GKE's
// gateway) routes with kvroute's precise prefix-cache index.
//
// # The protocol, as Envoy and the Inference Extension define it
//
// Envoy opens one ext_proc stream per HTTP request and, with the picker's
// filter configured for full-duplex streamed bodies, sends the request
// headers, the request body in chunks, then (once the upstream answers) the
// response headers, the response body chunks and trailers. The picker:
//
//   - buffers the request body to its end of stream, chooses an endpoint with
//     a kvroute.Picker, and only then answers the request headers, with the
//     chosen "ip:port" set in the x-gateway-destination-endpoint header and,
//     with the same value, in the response's dynamic metadata under the
//     envoy.lb namespace (key x-gateway-destination-endpoint). It clears the
//     route cache so that Envoy's load balancer (the override-host policy or
//     an original-destination cluster) sees the header. The buffered body is
//     returned as streamed body mutations of at most 62000 bytes each (some
//     gateways refuse a chunk above 64 KiB), the last ending the stream;
//     when trailers, not a body chunk, ended the request, no chunk ends it
//     and the trailers' answer, sent after the body, completes the request.
//     An empty body that Envoy sends as one (the headers without end of
//     stream, then an empty chunk ending it) is answered as a body: one
//     empty chunk ending the stream, or, on an inference API's path, 400.
//     When the Router's profile step (package disagg) split the request,
//     the same answer sets x-prefiller-host-port and llm-d's current
//     x-llm-d-prefiller-host-port on the request to the prefill endpoint
//     (the host:port of its Address, else its ID:
//     disagg.PrefillerHostPort), for the decode pod's routing sidecar, as
//     llm-d's picker does;
//     otherwise a client's own values of those headers are removed. So are
//     a client's values of the other headers llm-d's sidecar acts on, which
//     the picker never sets (x-encoder-hosts-ports,
//     x-kv-cache-source-host-port, x-data-parallel-host-port and the
//     x-llm-d- names of the first two), as llm-d's picker clears them: they would steer the sidecar past the pick.
//     A client's own kv_transfer_params member is removed from the body
//     too (vLLM's KV connector would pull blocks from the remote_host it
//     names), unless Config.AllowClientKVTransferParams.
//     A request to an inference API's path with a trailing slash
//     ("/v1/completions/") is routed as that API's and its :path set to the
//     API's own (the query kept): vLLM answers the slashed path with a
//     redirect to its own address, which the client would follow past the
//     gateway. "/v1/models/" is passed through as "/v1/models" for the
//     same reason. The path is read percent-decoded, as vLLM matches its
//     routes ("/v1/%63ompletions" is routed as /v1/completions and sent as
//     that), so that an escaped path does not pass through round robin
//     with its body, kv_transfer_params included, untouched. A request to vLLM's token-in /inference/v1/generate is
//     routed by its body's token IDs, multimodal features and cache salt,
//     without rendering, as the kvroute gateway routes it (by load alone,
//     counted in kvroute_router_cache_blind_total{reason="raw_media"},
//     when its content_parts give raw media the engine resolves itself); a
//     body without token IDs, or with features vLLM refuses, is answered
//     400.
//   - needs the request body FULL_DUPLEX_STREAMED: in any other request
//     body mode Envoy waits for the request headers' answer before it sends
//     the body (NONE never sends it), while the picker answers the headers
//     once the body ended. Envoy names its modes in each stream's first
//     message (protocol_config); a request with a body under another mode
//     is answered at once, 500 naming the mode it needs, counted as result
//     body_mode in kvroute_extproc_requests_total and logged once, instead
//     of hanging until Envoy's message_timeout. A request whose headers end
//     it (GET /v1/models) is served in any mode. An Envoy that names no
//     modes (before protocol_config) is waited on.
//   - honours the subset hint: when the request's filter metadata carries
//     envoy.lb.subset_hint / x-gateway-destination-endpoint-subset (a list
//     of "ip:port", or one comma-separated string, whose items may be
//     comma-separated too), only those endpoints are candidates; a bare "ip"
//     names every endpoint on that address (each data-parallel rank), and
//     addresses compare as addresses. An empty or ineligible list is
//     answered 503. A value in the hint that is not a string (a list item,
//     or the hint itself when it is no list) names no endpoint and is
//     counted in kvroute_extproc_invalid_subset_hints_total; the 503 for
//     want of an eligible endpoint then says the hint was malformed.
//   - answers 503 (an ImmediateResponse) when no endpoint is available
//     (x-llm-d-request-dropped-reason: rejected-no-endpoints, as llm-d's
//     picker says it), 413
//     when the body exceeds the configured limit, 400 when it is not JSON
//     (an empty body included), 404 NotFoundError (vLLM's and the gateway's
//     body) when no endpoint serves the body's model, 409 when a request
//     with the same x-request-id is in flight and 400 when the
//     x-request-id is longer than tokenload.MaxRequestIDBytes, each body
//     in the error shape of the request's API (Anthropic's on /v1/messages
//     and /v1/messages/count_tokens, vLLM's OpenAI one elsewhere), as
//     the engine answers. An inference body is read as vLLM reads its
//     bytes, with Python's json.loads: one that
//     starts with a UTF-8 byte order mark is routed, and sent on, without
//     it (json.loads decodes it as UTF-8-sig), and a UTF-16 or UTF-32 one,
//     with or without a mark, as the UTF-8 JSON it encodes (json.loads
//     detects either encoding), the copy charged to the body budget; one
//     that is not text in its encoding is answered 400 naming it.
//   - buffers every body within a picker-wide budget of body bytes in flight
//     (Config.MaxBodyBytesInFlight), charged as the chunks arrive and
//     returned when the upstream answers or the stream ends: a stream whose
//     body finds no room is answered 503 with Retry-After, so that streams
//     that send a large body slowly, or never finish it, cannot hold more
//     memory than the budget.
//   - with Options.Session (package session; kvroute-epp --session-config),
//     the Router's session profile keys each request by its session header
//     or llm-d's llm-d-session cookie and prefers the endpoint of the
//     session's last turn; the picker records the endpoint Envoy reports as
//     having served, answers a response to a request without a key with
//     llm-d's Set-Cookie naming that endpoint (appended beside the
//     engine's), and a malformed key under strict with 400.
//   - with Config.Fallbacks (protocol v0.4.0), names the pick followed by
//     that many fallback endpoints, "ip:port,ip:port,...", in the header and
//     the metadata alike: the next best candidates by kvroute's score
//     (kvroute.Decision.Fallbacks), which Envoy, given a retry policy, tries
//     in order when the pick fails. A request without a prompt names the
//     next endpoints of its rotation.
//   - uses the response path for load accounting: the first response body
//     chunk releases the request's prompt tokens (Decision.FirstChunk); the
//     end of the response, a reset, or the client going away releases the
//     request (Decision.Done), exactly once. When Envoy reports the endpoint
//     that actually served the request (envoy.lb /
//     x-gateway-destination-endpoint-served in the metadata context) and it
//     differs from the pick, that is counted, and when it is one of the
//     fallbacks the request's load and prediction move there
//     (Decision.Served), so that a failed pick does not look busy and the
//     fallback does not look idle; the client's x-kvroute-endpoint names it.
//     A served-endpoint value that is not a string names no endpoint: the
//     load stays with the pick, and it is counted in
//     kvroute_extproc_invalid_served_endpoints_total and logged at debug.
//   - with Config.ObserveCachedTokens, reads the cached prompt tokens the
//     engine reports in a successful response's usage from those chunks (a
//     JSON body, or the final usage chunk of a stream) and ends the request
//     with them, so that the router's accuracy loop works behind Envoy as
//     it does in the kvroute gateway; kvroute_extproc_usage_total counts
//     what it read, by result, and the buffer it reads with is charged to
//     Config.MaxBodyBytesInFlight.
//   - passes every response body chunk back unchanged (a streamed body
//     mutation per chunk), so streaming responses stream; when Envoy says
//     in the stream's first message (protocol_config) that it sends the
//     response body in another mode (STREAMED, BUFFERED or
//     BUFFERED_PARTIAL), each chunk is answered without a mutation, the
//     only answer Envoy takes in those modes (STREAMED refuses a streamed
//     mutation; BUFFERED reads it as an empty body, which fails a response
//     with a content-length).
//   - makes at most one decision per stream. A request-phase message after
//     the request's end of stream (another body, even an empty one; the
//     headers again; trailers twice), or a body or trailers before the
//     request headers, is a protocol error: the stream ends
//     with one gRPC status InvalidArgument naming it, the stream's decision
//     is released, and kvroute_extproc_protocol_errors_total{message} counts
//     it (message is request_headers, request_body or request_trailers).
//     Trailers after a body that ended the request are acknowledged once.
//
// # Admission under overload
//
// With Options.Admission (an admission.Controller, the one the Router was
// built with) the picker puts requests through kvroute's admission stage,
// as the kvroute gateway does. It reads, from the request headers Envoy
// sends, the objective (x-gateway-inference-objective, or llm-d's alias
// x-llm-d-inference-objective), the fairness ID
// (x-gateway-inference-fairness-id, alias x-llm-d-inference-fairness-id)
// and an optional queue timeout (x-kvroute-queue-timeout, a Go duration in
// (0, 1h]) into the pick's
// context. While every candidate is saturated the pick waits in the
// admission queue, the ext_proc stream open; Envoy resetting the stream
// (the client went away) removes the request from the queue at once and
// counts it as client_abort. The picker tells the admission of every pick,
// first response chunk and end of a request (Notify), so that released
// capacity dispatches the queue at once. Refusals are ImmediateResponses:
// 429 with Retry-After when shed or the queue is full, 503 when the queue
// deadline passed or the admission closed, each with the reason in
// x-kvroute-admission (shed, queue_full, expired, closed) and in llm-d's
// x-llm-d-request-dropped-reason (rejected-saturated,
// rejected-ttl-expired, rejected-shutting-down); a malformed
// queue timeout is answered 400 naming the header, before any pick.
// kvroute_extproc_requests_total counts 429s as result shed, 503s as
// no_endpoint and 400s as bad_request. Without Options.Admission none of
// these headers is read.
//
// Envoy's ext_proc filter has a message timeout (message_timeout) for each
// answer of the picker; a request may wait in the queue up to its queue
// timeout, so that timeout must be at least the longest queue timeout.
//
// # Conformance test hooks
//
// The Inference Extension's conformance suite steers a picker with two test
// hooks, which Config.ConformanceTestHooks turns on (off by default: with
// them any client chooses its own endpoint): the test-epp-endpoint-selection
// request header restricts the candidates to the endpoints it names, in its
// order ("ip" names every data-parallel rank on that address, "ip:port" one;
// none known is answered 503), and the x-conformance-test-served-endpoint
// response header reports the served endpoint Envoy put in the metadata (or
// the reference picker's failure text when Envoy reported none). The tests
// named after the suite's tests (TestGatewayFollowingEPPRouting, ...) replay
// its picker-facing cases through envoysim.
//
// # Status over HTTP
//
// StatusHandler serves, on the picker's HTTP port, /ready (the readiness
// the health service reports, as JSON with the reason) and a status page at
// /debug/kvroute, the same paths as the kvroute gateway's.
//
// A request routed without cache information because its render failed says
// so to the client in the x-kvroute-render-fallback response header, next to
// x-kvroute-endpoint.
//
// Server also registers the gRPC health service with the protocol's three
// service names (liveness, readiness and the ext_proc service itself), and
// the name the Inference Extension's own manifests probe its picker by,
// inference-extension (PoolSyncedService: serving once discovery gave the
// first endpoint set).
// FollowReadiness keeps readiness in step with a kvroute.Router: not ready
// until the picker has endpoints and the router's index has caught up with
// every endpoint's KV-event stream, so that Envoy does not send traffic to a
// picker that would route it cold. Without endpoints its reason is "no
// endpoints", followed by the followed source's own when it gives one (a
// host's endpoint discovery saying why it found none). FollowReadiness asks on the Options'
// clock, so a test drives it with telemetry.Manual.
//
// # Metrics
//
// The kvroute_extproc_* metrics go to Options.Registerer. A nil Registerer
// registers nothing. New registers every collector of the component through
// Set.Register, all or none (New fails and leaves nothing registered). Close
// unregisters exactly what New registered, so a closed component can be
// built again on the same registry.
//
// # Testing without Envoy
//
// Envoy is not installable on the machines kvroute is built and tested on, so
// the package ships envoysim, a small reverse proxy that behaves as Envoy's
// ext_proc filter does towards the picker (the same message sequence over a
// real gRPC stream, forwarding to the endpoint named in the header, retrying
// down the list, failing open when configured to). It is used by this
// package's tests and the demo, never in production.
//
// # Dependencies
//
// This is a module of its own so that kvroute's core module does not pull in
// gRPC and Envoy's API: google.golang.org/grpc (the server and the health
// service) and github.com/envoyproxy/go-control-plane/envoy (the generated
// ext_proc message types).
package extproc
