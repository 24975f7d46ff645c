// Package server is the HTTP front of kvroute's simulated vLLM engine
// (package simengine; the binary is cmd/simengine): it serves a
// simengine.Engine on the wall clock with vLLM's routes and response shapes,
// so a gateway, the render client and the KV-event subscriber can be
// exercised without GPUs.
//
// Routes: /v1/completions and /v1/chat/completions (JSON and SSE, ending in
// "data: [DONE]"), /v1/messages (Anthropic, SSE with Anthropic's event names)
// and /v1/messages/count_tokens ({"input_tokens": N}, nothing run),
// /v1/responses (JSON and SSE), the four render routes (only with
// Config.EnableScaleOut; otherwise every render path answers FastAPI's bare
// {"detail":"Not Found"} 404, as vLLM v0.30 without --enable-scale-out),
// /v1/models, /health, POST /reset_prefix_cache and /metrics (a private
// Prometheus registry per server with vllm:prefix_cache_hits_total,
// vllm:prefix_cache_queries_total, vllm:request_success_total,
// vllm:num_requests_running, vllm:num_requests_waiting and more). An unknown
// model name gets vLLM's 404 ErrorResponse ("The model `X` does not exist.",
// type NotFoundError, param "model"); /v1/messages answers it, and the other
// errors its handler finds, in vLLM's Anthropic envelope
// ({"type":"error","error":{"type","message"}}).
//
// GeneratePath, vLLM's token-in route (with Config.EnableScaleOut), reads
// features and content_parts as vLLM's GenerateRequest does and refuses
// what it refuses. The engine has no multimodal model: admitted features
// leave the prompt its tokens and key its blocks as vLLM's items do (each
// item's mm_hash is an extra key of every block its placeholders overlap,
// published in the BlockStored events' extra keys), and a content_parts media part (image_url,
// audio_url, video_url) is answered 400 "This model does not support
// multi-modal inputs", as vLLM answers it for a text-only model. Its
// output_mode is "tokens" (token IDs only, the default, the mode vLLM's
// answers name) or "text" (each choice's text too, as vLLM's RFC #56851
// proposes), named in the answer; any other is answered 400.
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
// Config.LoRAModules are adapters of the model, listed on /v1/models as
// vLLM lists them (root their path, parent the base model, no
// max_model_len: vLLM gives only its base models' cards one). With
// Config.AllowRuntimeLoRAUpdating (vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING)
// POST /v1/load_lora_adapter and /v1/unload_lora_adapter register and
// forget adapters at run time, with vLLM's answers (lora_admin.go);
// without it both are unknown paths.
//
// With Config.ServedModelAliases the base model is served under further
// names, as by vLLM's --served-model-name a b (aliases.go): /v1/models
// lists each name with the same root and max_model_len, a request naming
// any of them runs on the one engine and its one prefix cache, and the
// generating routes answer with the first name (Config.Model).
//
// With Config.ExtraModels one address serves several models, as a pod
// fronting one engine process per model would (models.go): an engine per
// model, chosen by the request's model field, each publishing on its
// model's topic kv@<ip:port>@<model> through the one publisher under one
// sequence; /v1/models lists them, and a snapshot reply carries each extra
// model's chunks after its topic frame (kvroute's extension of vLLM's
// snapshot protocol).
//
// Its connections live as uvicorn's, vLLM's HTTP server's, do (conn.go):
// a request header's timeout runs from its first byte, and a keep-alive
// connection idle for 5 s after its last response is closed
// (VLLM_HTTP_TIMEOUT_KEEP_ALIVE's default), so that a client's pool meets
// the closes it meets on vLLM.
//
// With Config.RenderWorkers the render routes saturate like a vLLM renderer,
// whose tokenization is bound to about one core: at most RenderWorkers
// renders are worked on at once, each for RenderTokenCost per prompt token,
// the others wait first come, first served, and a render whose client has
// gone is still worked on (simengine_render_workers_busy,
// simengine_render_queued, simengine_render_abandoned_total). The answers
// stay the same, only later; without it renders answer at once.
//
// Prefill/decode disaggregation (Config.PD, pd.go) follows vLLM with the
// NIXL connector. A client (llm-d's routing sidecar, kvroute's
// disagg/sidecar) sends a prefill-role server the request with max_tokens 1
// (max_output_tokens 1 on /v1/responses), stream false and
// kv_transfer_params {"do_remote_decode": true}; /v1/completions,
// /v1/chat/completions, /v1/responses and /v1/messages read them, as
// vLLM's do (its Messages API carries them into the chat completion it
// serves a message as, and answers them); it computes the prompt, holds the request's blocks in use (as vLLM's
// connector delays freeing them) until a decoder reads them or
// PDConfig.LeaseTTL passes (expiry is checked on each prefill request and
// read, no timer), and answers its one token with kv_transfer_params {"do_remote_prefill":
// true, "do_remote_decode": false, "remote_engine_id", "remote_block_ids",
// "remote_request_id", "remote_host", "remote_port", "tp_size": 1} (a
// streamed answer carries none, as vLLM's does not, and its blocks are
// held under a lease all the same; a request whose client went away frees
// them). The
// client then sends the original request with those parameters to a
// decode-role server, which reads the blocks with a real HTTP call to the
// prefiller's KVTransferReadPath, waits PDConfig.TransferTimePerToken per
// token read, admits the request with those tokens computed
// (simengine.Request.RemoteKVTokens), publishes BlockStored (medium GPU) for
// the received blocks as vLLM's decoder does when it caches them, reports
// them in usage.prompt_tokens_details.cached_tokens (all but the last prompt
// token, which vLLM recomputes), and decodes. A read that fails or comes
// back short (prefiller gone, request unknown or expired, blocks evicted,
// parameters unusable) is counted in simengine_kv_transfer_failures_total
// by reason; under kv_load_failure_policy "recompute" (vLLM's default) the
// missing tokens are computed locally and the request completes, under
// "fail" it is answered 500. A "both" server has no KV connector and
// ignores kv_transfer_params, as today. Differences from vLLM: remote_host
// and remote_port are the prefiller's HTTP address (vLLM's name the NIXL
// side channel), remote_block_ids are the blocks' 64-bit hashes (vLLM's are
// physical block numbers), the read is one HTTP call answered at once (the
// decoder then waits the transfer time), and the decoder reads before the
// request enters the engine (it is counted meanwhile in
// vllm:num_requests_waiting, reason "deferred", as vLLM counts
// WAITING_FOR_REMOTE_KVS).
//
// A cache_salt is checked as vLLM's validate_cache_salt checks it, before
// the model is looked up: a salt that is not a non-empty string, is longer
// than 128 characters or holds '@', '/', a backslash or NUL is answered 400
// with vLLM's message and param "cache_salt" (/v1/messages has no
// cache_salt: vLLM drops the key).
//
// A completions or chat completions request (on its render route too)
// with stream_options set but stream not is answered 400, param
// "stream_options", as vLLM's request models answer it.
// Their priority is read as vLLM reads an int (an integer, an integral
// number, a boolean or a decimal string, of at most 4300 digits as Python
// converts) and refused 400 otherwise; the engine does not schedule by
// it, and the render routes echo it.
//
// Request ids follow vLLM's (requestid.go): a request's X-Request-Id
// header sets its response's id after the route's prefix ("cmpl-",
// "chatcmpl-", "generate-tokens-"; /v1/messages answers with the id of
// the chat completion vLLM serves it as, "chatcmpl-"), else the body's
// request_id does, else one is generated; /v1/responses reads only the
// body's request_id. A prefiller's remote_request_id is the response's id
// and eight random hex digits, as vLLM's engine ids are, so two requests
// sent with one X-Request-Id hold their blocks apart. With
// Config.EnableRequestIDHeaders (--enable-request-id-headers) every
// response carries X-Request-Id: the request's, or a random uuid4 in hex.
//
// Differences from vLLM: the engine never stops early (finish_reason is always
// "length"), n must be 1, previous_response_id is rejected, the KV-event
// endpoint is always bound (vLLM connects to an endpoint without "*"), and a
// failed /reset_prefix_cache answers 409.
package server
