// Package kvroute is a library of routing primitives for precise prefix-cache
// routing of LLM inference traffic.
//
// Model servers such as vLLM and SGLang publish KV-cache events over ZeroMQ:
// every time a block of prompt tokens becomes cached (BlockStored), is evicted
// (BlockRemoved) or the whole cache is reset (AllBlocksCleared). A gateway that
// embeds kvroute subscribes to those events, keeps an exact index of which
// endpoint holds which KV blocks, tokenizes each request through vLLM's render
// endpoints so that its token IDs match the engine's, and sends the request to
// the endpoint that already holds the longest prefix of its KV cache — falling
// back to the least-loaded endpoint when the cache-warm ones are saturated.
//
// The library is split into small packages that are usable on their own:
//
//   - kvindex: router block keys (per-block XXH3-64 of token IDs, chained) and the
//     lock-free block index with tiers, cache groups, speculative entries and a
//     fused longest-prefix Match.
//   - kvevents: the msgpack decoder and encoder for every vLLM and SGLang event
//     generation, applying batches to the index, supervised ZeroMQ subscribers
//     with sequence tracking and replay, and a Go publisher.
//   - replay: the bounded replay client (DEALER) and a replay buffer + server.
//   - render: the client for vLLM's /render endpoints.
//   - affinity: the prefix-cache affinity filter with its TTFT gate, and
//     calibration of the peak prefill throughput.
//   - tokenload: in-flight token accounting and the token-load scorer.
//
// This root package assembles them: a Router implements the small Picker
// interface that any gateway calls once per request (Pick), then reports the
// request's first response chunk and its end on the returned Decision.
//
// # Defaults
//
// DefaultConfig follows llm-d's precise prefix-cache routing guide
// (https://github.com/llm-d/llm-d/tree/main/guides/precise-prefix-cache-routing),
// the reference deployment of vLLM engines publishing KV events to a router:
// 64-token blocks, each engine publishing on port 5556 under the topic
// "kv@<ip>:<port>@<model>" (filter "kv@"), and speculative entries that
// live 2 s. The affinity filter and token-load scorer defaults are those of
// the llm-d router's prefix-cache-affinity-filter and token-load-scorer
// plugins; replay on port 5559 is kvroute's default. An engine started with
// vLLM's --block-size 64 and a --kv-events-config naming those ports and
// that topic works with a Router built from DefaultConfig and the engine's
// model.
//
// # Stages
//
// Pick is composed of stages that a host framework may call from separate
// hooks: Router.Match (render, block keys, index lookup) returns a Selection;
// Selection.Filter applies the affinity filter, Selection.Score the
// token-load and extra scorers, and Selection.Commit records the decision
// (load accounting, speculative entries, prediction metrics). Every way ends
// in one Decision, whose FirstChunk and Done are the request's lifecycle.
// With Request.ID set, Router.Decision finds it by ID, for hosts whose
// callbacks carry only the ID; the ID table is bounded (Config.Requests)
// and ends the requests it drops.
//
// # No silent cache-blind routing
//
// The mistakes that would make every decision blind to the caches are
// errors where they are made: New without a Model; Pick before SetEndpoints
// when the router subscribes to events or renders on the endpoints
// (ErrEndpointsNotSet); a request to render without an API (ErrNoAPI; see
// render.APIForPath); a request Model other than Config.Model with events on
// (ErrModelMismatch). What cannot be refused is counted and logged at most
// once a minute: kvroute_router_cache_blind_total{reason} for load-only
// decisions whose cause is known (render_failed, render_disabled,
// events_disabled), and kvroute_router_endpoint_model_mismatch{endpoint}
// for an engine whose KV-event topic names another model than the router's.
package kvroute
