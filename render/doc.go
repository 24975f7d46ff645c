// Package render turns an inference request into the exact prompt token IDs
// the engine will see, by calling vLLM's render endpoints
// (/v1/completions/render, /v1/chat/completions/render, /v1/messages/render,
// /v1/responses/render).
//
// Precise prefix-cache routing keys the KV index by the engine's own tokens,
// after chat templating and multimodal placeholder expansion, so the router
// cannot tokenize on its own: it asks a vLLM renderer. Every request pays for
// that call in its time to first token, and a slow or broken renderer must not
// take the gateway down, so the Client is built around bounded failure:
//
//   - Endpoints: a fixed base URL, or a dynamic set given with SetEndpoints.
//     Calls go round-robin over the full snapshot sorted by endpoint ID.
//   - Retry: after a transport error, a timeout, a 408, a 429 or a 5xx the
//     Client retries exactly once on a different endpoint, and so after the
//     bare 404 of a renderer without render routes (ErrRenderNotEnabled),
//     whose endpoint is then passed over for that route (the others still
//     used) for 30 s on Options.Clock, so that later renders do not pay
//     for the 404 again; while every endpoint is passed over a render fails
//     at once with ErrRenderNotEnabled, without an attempt. Each such 404
//     counts in kvroute_render_not_enabled_total; the mode discovery's
//     probes, to which a legacy renderer's 404 is an answer, are neither
//     retried nor pass an endpoint over. Other 4xx answers return at once,
//     and nothing is retried once the caller's context is done.
//   - Budgets: Timeout (5 s) for completions and max(Timeout, MMTimeout) (30 s)
//     for chat, Messages and Responses cover both attempts; AttemptTimeout
//     (2 s; 0 turns it off) caps each attempt so that a hung first attempt
//     leaves time for the retry, in a render another endpoint could retry
//     (a fixed URL, or the only endpoint serving the model, has one
//     attempt with the whole budget). An earlier caller deadline wins. A zero
//     Config means all these defaults (DefaultConfig shows them).
//   - Pressure: a renderer tokenizes on about one core, so past its
//     capacity every render waits in its queue, and with the budget above a
//     saturated renderer makes every request wait the whole budget and
//     route blind. The Client therefore keeps its own queue, bounded in
//     time: each endpoint has MaxConcurrency slots (8; 0 = no limit); a
//     render takes a slot on the round robin's endpoint or, when that one
//     is full, on the next endpoint with a free slot, and otherwise waits
//     for one, first come first served, at most MaxQueueWait (500 ms, a
//     tenth of the completions budget; 0 = no wait). A render that gets no
//     slot in time fails at once with ReasonSaturated (ErrSaturated),
//     without an HTTP attempt, and its request routes by load.
//   - Hedging (Hedge, on by default): each endpoint keeps a streaming
//     estimate of its recent 95th-percentile attempt latency (constant
//     time and space, following a change within a few dozen renders). A
//     render still running at that estimate (10 ms at least; once the
//     endpoint has 20 samples) is sent again to another endpoint that has
//     a free slot; the first answer wins and the call returns at once. The
//     loser, when its request was written whole, is left to finish in the
//     background: its answer is read and discarded, its slot held until
//     then and its latency sampled, so that its HTTP/1.1 connection is
//     kept (cancelling a request in flight closes it, and the renderer
//     tokenizes a request it has whole anyway); a loser not yet written
//     whole is canceled before the call returns, and keeps its connection
//     too when no byte of it had been sent (a request within the 32 KiB
//     write buffer whose write had not run yet). Close cancels the ones
//     still in the background. The hedge
//     is the call's second attempt: a hedged render is not retried. A
//     hedge goes only to an endpoint with a free slot and fewer renders in
//     flight than the first one's, and hedges stay within 5 % of the
//     renders (plus a burst of 10); otherwise it is skipped. A renderer
//     may keep working on a render whose client left, so hedging onto an
//     equally loaded renderer, or on every hiccup of renderers whose p95 is
//     their median, would only add load.
//   - Capacity: Client.Capacity(endpoint) shows an endpoint's renders in
//     flight against its limit, those queued, the recent queue wait and the
//     recent p95, without allocating: a saturation signal for a host or an
//     admission stage.
//   - Modes: Anthropic Messages and OpenAI Responses are rendered natively when
//     the renderer supports them and otherwise, in legacy mode, translated into
//     a chat-completions render call. The auto mode probes once and remembers.
//   - Errors: every failure is an *Error whose Reason a caller can switch on
//     (and which is the label of the failures metric). A renderer started
//     without vLLM's --enable-scale-out flag answers a bare
//     {"detail":"Not Found"} 404; the Client reports that as ErrRenderNotEnabled
//     rather than as a model mismatch, because a router that silently gets no
//     tokens routes cache-blind.
//
// The request body is forwarded byte for byte, with two documented edits on
// the render copy only (Config.PrefillOnly and Config.OmitMMKwargs), and the
// inbound Authorization header is forwarded verbatim. Responses are read with a
// size cap and decoded by a small scanner that reads only token_ids,
// features.mm_hashes, features.mm_placeholders and cache_salt; features vLLM's
// own request model would refuse (mm_hashes and mm_placeholders naming
// different modalities or counts, empty or overlapping placeholders) make a
// malformed answer, failed with reason decode, as do more prompts than the
// request has (one for chat, Messages and Responses; for completions, one
// per entry of a list of prompts and of prompt_embeds) and more multimodal
// items than the prompt has tokens, refused before they are decoded so that
// a hostile answer allocates no more than a valid one of its size. RenderInto
// decodes into a caller's Result and reuses its token arrays, so that a
// router rendering request after request allocates none.
//
// Metrics (registered on Options.Registerer, given to New): the histogram
// llm_d_epp_token_producer_render_duration_seconds{result} and the counter
// llm_d_epp_token_producer_render_failures_total{reason}, with the names and
// label values of the llm-d router so that dashboards carry over. A nil
// Registerer registers nothing; New registers both collectors through
// telemetry.Set.Register, all or none (New fails and leaves nothing
// registered), and Close unregisters exactly what New registered, so a
// closed Client can be built again on the same registry. Several Clients
// share one registry: a Client that finds the collectors already registered
// by another reuses them, and its Close leaves those shared ones registered.
//
// kvroute's own metrics of the render queue (registered the same way): the
// histogram kvroute_render_queue_wait_seconds (the wait for a slot), the
// counters kvroute_render_queue_rejections_total{reason} (queue_timeout,
// no_queue, deadline) and kvroute_render_hedge_losers_total{end}
// (drained, canceled), kvroute_render_hedges_total{outcome} (won, lost,
// failed, skipped), and, read from the endpoints at scrape time so that an
// endpoint leaves them when it leaves the set, the gauges
// kvroute_render_in_flight, kvroute_render_queued,
// kvroute_render_concurrency_limit, kvroute_render_queue_wait_recent_seconds
// and kvroute_render_latency_p95_seconds, each by endpoint (only the first
// Client registered on a registry exports these gauges). A saturated render
// also counts in the failures metric, with reason "saturated".
//
// Connections: renders go over kvroute's own HTTP/1.1 keep-alive transport
// (internal/h1pool, shared with the gateway's engine pool), which writes the
// request and reads the answer on the render's goroutine and gives the
// connection back to its pool when the answer has been read, before the
// render's slot is released. Connections per endpoint are capped at
// MaxConcurrency, so a steady load settles at that many connections and
// opens no more. A render attempt cancelled with its request in flight (a
// hedge loser partly written, a timeout, the caller gone) closes its
// connection (HTTP/1.1 has no other way to abort it); it is never pooled
// half-read. One cancelled before any byte of its request was sent (a
// hedge loser whose write had not run yet, on a CPU-starved machine)
// gives its connection back instead. net/http's Transport, used before, also closed a connection
// whose writer goroutine reported the request written more than 50 ms after
// the answer (a CPU-starved machine), and the next render dialed again.
// The counters kvroute_render_connections_dialed_total and
// kvroute_render_connections_closed_total{reason} (canceled, broken, asked,
// idle) show the churn; https renderers go through a net/http Transport
// (Options.TLSConfig) and are not counted there.
//
// Every failed attempt is counted in kvroute_render_attempt_failures_total
// {reason}, also when a retry or a hedge made up for it and the render
// succeeded, so that a renderer failing behind a healthy one shows; a
// cancelled attempt (a hedge loser abandoned, the caller gone) is not. The
// auto mode's discovery probes (Discover, or the first Messages or
// Responses request) are counted in none of the render metrics: a legacy
// renderer's 404 on the native probe is expected, not a failure. They take
// an endpoint's slots like renders.
//
// Timers: the wait for a slot, the latency estimates and the hedge timer run
// on Options.Clock, so tests drive them with telemetry.Manual.
//
// Check runs a deployment's render check (every endpoint must return token
// IDs for the model) and reports per endpoint.
//
// The package imports nothing else from kvroute but telemetry (the injected
// dependencies), internal/jsonscan (the lexical JSON scanner it shares with
// the gateway package, built on internal/jsonstr), internal/jsonids (token
// IDs written as JSON), internal/h1pool (the HTTP/1.1 transport it shares
// with the gateway), internal/jsonconf (kvroute's configuration decoder),
// internal/jsonexact (the request body read as vLLM reads it, for the
// legacy Messages translation), internal/bytebudget (its reader that caps
// a renderer's answer) and internal/endpointid (the bounds of an endpoint
// ID);
// it speaks in its own small types (strings for endpoint IDs, []uint32 for
// tokens).
package render
