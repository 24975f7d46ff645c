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
// This root package assembles the packages listed below: a Router
// implements the small Picker interface that any gateway calls once per
// request (Pick), then reports the request's first response chunk and its
// end on the returned Decision. Each of the other packages is usable on its
// own.
//
// # Packages
//
// Every library package of the repository, by its import path under
// github.com/kvroute/kvroute. The routing core:
//
//   - kvindex: router block keys (per-block XXH3-64 of token IDs, chained)
//     and the lock-free block index with tiers, cache groups, speculative
//     entries and a fused longest-prefix Match.
//   - kvevents: the supervised ZeroMQ subscriber Pool, with sequence
//     tracking and replay, and the Applier that applies decoded event
//     batches to the index, counting every event it skips or drops.
//   - kvevents/wire: the KV-event codec: the msgpack decoder for every vLLM,
//     SGLang and TensorRT-LLM event generation, the byte-exact encoder and
//     the topic frame.
//   - kvevents/publish: the engine side, a Go Publisher speaking vLLM's
//     KV-event protocol (PUB and replay ROUTER), for Go engines, simulators
//     and tests.
//   - kvevents/snapshot: an engine's whole KV-cache state loaded from vLLM's
//     snapshot socket, for a router that joins mid-stream or missed more
//     than the replay buffer holds.
//   - replay: the bounded replay client (DEALER) and a replay buffer and
//     server.
//   - render: the client for vLLM's /render endpoints.
//   - affinity: the prefix-cache affinity filter with its TTFT gate, and
//     calibration of the peak prefill throughput.
//   - tokenload: in-flight token accounting and the token-load scorer.
//   - approx: the approximate prefix index of endpoints whose KV events are
//     not live, fed by the router's own decisions.
//
// What a host plugs into Options, or runs beside a Router:
//
//   - admission: the admission stage under overload (Options.Admission):
//     priorities, fair shares between flows, queue deadlines, shedding.
//   - session: session affinity (Options.Scorers and Options.Profile): the
//     turns of a conversation prefer the endpoint that served its last turn.
//   - lora: LoRA adapter affinity (Options.Scorers): engines running the
//     request's adapter are preferred over those that would load it.
//   - disagg: prefill/decode disaggregation: endpoint roles and the Profile
//     that picks a decode endpoint and, when the request is split, a
//     prefill endpoint.
//   - disagg/sidecar: the routing sidecar of a decode pod and the two-step
//     prefill/decode exchange it runs (binary cmd/kvroute-sidecar).
//   - models: several models per Router: each endpoint's served models and
//     the model-rewrite table for aliases and canaries.
//   - enginemetrics: the engines' own saturation signals and LoRA adapters,
//     scraped from their /metrics.
//   - accuracy: the closed loop on the index's accuracy: predicted against
//     engine-reported cached tokens per endpoint.
//   - cluster: active-active router replicas sharing in-flight load,
//     routing decisions and membership through Redis.
//   - checkpoint: index persistence: the checkpoint file and bootstrap from
//     peer replicas.
//   - llmd: an llm-d EndpointPickerConfig, or a configuration carrying llm-d
//     plugin parameters, loaded into a Config.
//   - telemetry: the observability bundle (registerer, logger, tracer
//     provider, clock) that every package's Options embeds.
//
// Serving and testing:
//
//   - gateway: the OpenAI- and Anthropic-compatible gateway, a reverse proxy
//     on a Picker (binary cmd/kvroute-gateway).
//   - gateway/gatewaycmd: the gateway's command line, shared by the
//     binaries that run it.
//   - simengine: the simulated vLLM engine, the fleet of the end-to-end
//     tests, examples and benchmarks (binary cmd/simengine).
//   - simengine/server: the simulated engine's HTTP front, with vLLM's
//     routes, metrics and ZeroMQ KV events.
//   - e2e: the end-to-end scenarios on a simulated fleet, run by its tests
//     and by examples/demo.
//
// In Go modules of their own, so that their dependencies stay out of this
// one:
//
//   - contrib/extproc: an Envoy ext_proc endpoint picker for Gateway API
//     Inference Extension pools (binary contrib/extproc/cmd/kvroute-epp).
//   - contrib/extproc/envoysim: a proxy that behaves towards an endpoint
//     picker as Envoy's ext_proc filter does, for tests.
//   - contrib/k8s: endpoints from the Kubernetes API, the Ready pods of an
//     InferencePool or of a label selector.
//   - contrib/otel/otlpenv: OTLP trace export configured by the
//     OpenTelemetry SDK's environment variables (binary
//     contrib/otel/cmd/kvroute-gateway, the gateway exporting its spans).
//   - contrib/otel/otlptest: a real OTLP trace receiver for tests.
//   - deploy: the Kubernetes manifests, Helm chart, alert rules and
//     dashboard, and the tests that hold them to kvroute's APIs and metrics.
//
// The other directories hold no library: the binaries are under cmd/ (and
// each contrib module's cmd/), the runnable examples under examples/
// (quickstart, demo, calibrate), the benchmark suite and the routing
// simulator under bench/, and packages for kvroute's own use under
// internal/.
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
// The zero Config means these defaults: New applies them to every field left
// at its zero value, and DefaultConfig only shows them, so Config{Model: m}
// and DefaultConfig() with Model m build the same Router. The switches that
// are on by default and the numbers whose 0 turns something off are pointers,
// nil meaning the default (cfg.Events.Enabled = new(false)). Each default is
// declared once, by the package that owns the setting, and passed down: the
// block size, the speculative TTL and the model are set at the top level
// only, never in the index, render or events sections.
//
// # The pipeline
//
// A Router routes each request through these steps, in this order; each
// lives in the file named after it, and the extension points are the
// interfaces a host passes in Options:
//
//   - admission (admission.go): the request's checks, then Options.Admission,
//     which may admit the request, make it wait or refuse it (Admission; the
//     default admits every request).
//   - profile (profile.go): Options.Profile runs the stages below once per
//     role the request is picked in, such as a prefill and a decode endpoint,
//     and returns one Decision holding the others in Decision.Roles (Profile;
//     the default picks once, in one role, among every candidate).
//   - render (render.go): the request's prompts, from Request.Prompts or the
//     render client; a failure routes the request by load alone.
//   - keys (keys.go): the prompts' block keys.
//   - lookup (lookup.go): each candidate's cached prefix from the index and
//     its in-flight load, hence the tokens it would have to prefill.
//   - filter (filter.go): Options.Filters, then the prefix-cache affinity
//     filter, narrow the candidates (Filter).
//   - score (score.go): each kept candidate's total score, the weighted sum
//     of the token-load scorer (Config.LoadWeight) and Options.Scorers
//     (Scorer, WeightedScorer).
//   - pick (pick.go): the highest total, ties broken by a hash of the
//     request's first new block and the endpoint's ID, the same on every
//     router replica (Config.LoadTieTolerance, off by default, widens the
//     ties to scores within a load tolerance).
//   - commit (commit.go): load accounting, speculative index entries, the
//     prediction and cache-blind metrics, and the Decision.
//
// Router.Pick runs them all (picker.go): it is the Picker a gateway calls.
// A host framework may run them from separate hooks instead (selection.go):
// Router.Match (admission, render, keys, lookup) returns a Selection whose
// Filter, Score (with the pick) and Commit run the rest, and whose
// Candidate reports what the stages know of each candidate, as Filters and
// Scorers read it. Every way ends in one Decision, whose FirstChunk and Done
// are the request's lifecycle. With Request.ID set, Router.Decision finds
// it by ID (once Pick has returned it, every role set), for hosts whose
// callbacks carry only the ID; the ID table is bounded (Config.Requests)
// and ends the requests it drops. Every Pick is traced when
// Options.TracerProvider is set (trace.go): a "pick" span with "keys",
// "index_lookup", "filter" and "score" children and the render client's
// "render" attempts.
//
// # No silent cache-blind routing
//
// The mistakes that would make every decision blind to the caches are
// errors where they are made: New without a Model; Pick before SetEndpoints
// when the router subscribes to events or renders on the endpoints
// (ErrEndpointsNotSet); a request to render without an API (ErrNoAPI; see
// render.APIForPath); a request for a model no candidate serves
// (ErrModelMismatch: one no candidate's Endpoint.Models lists or, where
// none lists any, one other than Config.Model with events on). What cannot be refused is counted and logged at most
// once a minute: kvroute_router_cache_blind_total{reason} for load-only
// decisions whose cause is known (render_failed, render_disabled,
// events_disabled, prompt_embeds: a completions request with prompt
// embeddings, whose blocks vLLM keys by hashes of the embeddings and which
// is therefore not rendered; raw_media: a given prompt whose multimodal
// items are raw media the engine resolves itself, render.Prompt.RawMedia,
// a token-in request's content_parts), and kvroute_router_endpoint_model_mismatch{endpoint}
// for an engine whose KV-event topic names another model than the router's.
//
// # What Pick takes from the caller
//
// Pick's candidates are the endpoints passed to it, whatever SetEndpoints
// was given: SetEndpoints names the engines the router subscribes to
// (KV events) and renders on, Pick the ones this request may go to. An
// endpoint Pick is given that SetEndpoints never named is accepted, picked
// and its load accounted, but the router has no KV events from it: the
// index knows its cache only from the router's own speculative entries, so
// it looks cold. Pass the same list to both (or a subset to Pick) unless
// that is what you want. Either way a candidate's ID must be one
// SetEndpoints accepts: a pick that chooses one that is not (or names it a
// fallback) fails with ErrInvalidConfig, since the chosen ID labels the
// load series.
//
// The router does not read the request body for the model. The caller
// parses the body's "model" and sets Request.LoRA when it names a LoRA
// adapter (Request.Model stays empty for the base model, or names it); a
// request whose adapter is not set is keyed, and routed, as the base
// model. Package gateway does this for the OpenAI and Anthropic APIs.
//
// # Errors and HTTP status codes
//
// A render failure is not an error (the request is routed by load alone).
// Pick's errors map to these HTTP answers, as package gateway sends them:
//
//   - ErrModelMismatch: 404, as vLLM answers a model it does not serve; the
//     client named a model no candidate endpoint serves (see Endpoint.Models;
//     name a served model, or map the alias in the gateway's rewrite table).
//   - tokenload.ErrInvalidRequestID: 400; an X-Request-Id that is empty or
//     longer than tokenload.MaxRequestIDBytes.
//   - tokenload.ErrDuplicateRequestID: 409; a request with that ID is in
//     flight.
//   - session.ErrInvalidKey: 400; a malformed session header or cookie, with
//     session.Config.Strict.
//   - a refusal of Options.Admission: the status admission.HTTPStatus gives
//     it (429 for shed traffic and a full queue, 503 otherwise), with
//     Retry-After.
//   - ErrNoEndpoints, ErrEndpointsNotSet and anything else: 503 (no
//     endpoint can be chosen now; ErrEndpointsNotSet and ErrNoAPI are the
//     host's mistakes, so log them).
//   - the request's context ended: the client is gone; send nothing.
package kvroute
