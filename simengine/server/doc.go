// Package server is the HTTP front of kvroute's simulated vLLM engine
// (package simengine; the binary is cmd/simengine): it serves a
// simengine.Engine on the wall clock with vLLM's routes and response shapes,
// so a gateway, the render client and the KV-event subscriber can be
// exercised without GPUs.
//
// Routes: /v1/completions and /v1/chat/completions (JSON and SSE, ending in
// "data: [DONE]"), /v1/messages (Anthropic, SSE with Anthropic's event names),
// /v1/responses (JSON and SSE), the four render routes (only with
// Config.EnableScaleOut; otherwise every render path answers FastAPI's bare
// {"detail":"Not Found"} 404, as vLLM v0.30 without --enable-scale-out),
// /v1/models, /health, POST /reset_prefix_cache and /metrics (a private
// Prometheus registry per server with vllm:prefix_cache_hits_total,
// vllm:prefix_cache_queries_total, vllm:request_success_total,
// vllm:num_requests_running, vllm:num_requests_waiting and more). An unknown
// model name gets vLLM's 404 ErrorResponse ("The model `X` does not exist.",
// type NotFoundError, param "model").
//
// Render and generation share one tokenization path, so /render returns
// exactly the tokens the engine hashes into its prefix cache. With an active
// KVEventsConfig (vLLM's --kv-events-config keys) the server publishes the
// engine's KV events through a publish.Publisher, with its replay server, in
// the current (map events) or legacy (array events) layout. With a
// snapshot_endpoint it also serves KV-cache snapshots and publishes like
// vLLM's snapshot revision: every batch carries the publisher identity
// drawn at start, and an idle publisher sends an empty batch each second
// (kvevents_liveness.go; the timer runs on Options.Clock).
//
// With Config.RenderWorkers the render routes saturate like a vLLM renderer,
// whose tokenization is bound to about one core: at most RenderWorkers
// renders are worked on at once, each for RenderTokenCost per prompt token,
// the others wait first come, first served, and a render whose client has
// gone is still worked on (simengine_render_workers_busy,
// simengine_render_queued, simengine_render_abandoned_total). The answers
// stay the same, only later; without it renders answer at once.
//
// Differences from vLLM: the engine never stops early (finish_reason is always
// "length"), n must be 1, previous_response_id is rejected, the KV-event
// endpoint is always bound (vLLM connects to an endpoint without "*"), and a
// failed /reset_prefix_cache answers 409.
package server
