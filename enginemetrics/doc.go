// Package enginemetrics reads model servers' own saturation signals: a
// Scraper scrapes each endpoint's Prometheus metrics (vLLM's /metrics) on an
// interval and keeps, per endpoint, the latest waiting and running request
// counts and KV-cache usage — vLLM's gauges vllm:num_requests_waiting,
// vllm:num_requests_running and vllm:kv_cache_usage_perc (read as
// vllm:gpu_cache_usage_perc from servers older than vLLM 0.9).
//
// kvroute's own accounting knows what kvroute sent an engine; the engine
// knows what it is actually doing, including traffic from other routers and
// requests kvroute has lost track of. Scraper.Saturation turns the signal
// into the answer an admission stage needs — saturated when the waiting
// queue or the KV-cache usage reaches its threshold — and says when it does
// not know: never scraped, last scrape failed, or older than the staleness
// limit. A stale signal never counts as idle; the caller falls back to its
// own accounting. Saturation and Signal read an atomic snapshot, so they
// cost no lock and no allocation on the request path.
//
// Bounds: one scrape per endpoint at a time, at most Config.Concurrency in
// flight, each cut at Config.Timeout (on the Options' clock, so tests drive
// the interval, the timeouts and the staleness with telemetry.Manual) and
// Config.MaxBodyBytes. A redirect is never followed, with the Scraper's
// own client or one given in Options: it would send the scrape to another
// address and count that server's gauges as the endpoint's, so it fails
// the scrape as http_status. Only the lines of the gauges above are
// parsed, with prometheus/common/expfmt's text parser (OpenMetrics 1.0
// gauges read the same). Every failure is counted in
// kvroute_engine_metrics_scrape_failures_total by reason (connection,
// timeout, http_status, too_large, parse, missing_metric, bad_value); the
// endpoint label is the endpoint's configured ID, never a value from a
// response, and an endpoint's series leave with it.
//
// PeerLoads turns the scraped queues into an estimate of the load other
// routers carry on each engine (the engine's waiting and running requests
// less this router's own open ones), for gateway replicas that share no
// state; the gateway's peerLoadFromMetrics feeds it to the Router's load
// tracker on every scrape interval.
//
// A nil Registerer registers nothing. New registers every collector of the
// component through Set.Register, all or none (New fails and leaves nothing
// registered). Close unregisters exactly what New registered, so a closed
// component can be built again on the same registry.
//
// LoRA adapters: an engine started with --enable-lora also exposes
// vllm:lora_requests_info, a gauge whose labels list the adapters of its
// running batch (running_lora_adapters) and waiting queue
// (waiting_lora_adapters), comma-separated, and its adapter slots
// (max_lora, vLLM --max-loras); vLLM sets it to the wall-clock time at
// every iteration and never removes an old label combination, so the
// current state is the series with the largest value (an idle series
// naming no adapter is passed over when one names adapters, as the Gateway
// API Inference Extension does). Scraper.LoRA returns that state, fresh or
// not by the same rule as Signal, without allocating. Label values come
// from the engine: adapter names that are empty, longer than
// MaxLoRANameBytes, not UTF-8 or hold control characters, names beyond
// MaxLoRAAdapters per list, and a max_lora that is not a small integer are
// dropped and counted in kvroute_engine_metrics_lora_dropped_total by
// reason (invalid_name, too_many, bad_max_lora), the rest of the scrape
// kept (bytes that are not UTF-8, which the text parser refuses in a label
// value, are marked in the gauge's lines before parsing, so that they make
// the name invalid rather than the scrape); a gauge of another type,
// or whose series all hold NaN or an infinity, is read as no adapters and
// counted as bad_gauge. An engine without the gauge reports no adapters
// (LoRAInfo.Reported false); that is not a failure.
//
// KV-cache capacity: vLLM exports its cache configuration as
// vllm:cache_config_info, an info gauge whose labels include block_size,
// num_gpu_blocks, kv_cache_size_tokens (the group-aware capacity of newer
// releases) and the CPU offloading settings kv_offloading_size (GiB) and
// kv_offloading_backend. Signal.Cache carries them (CacheInfo); a label
// that is not an integer in range (block_size at least 1) makes
// CacheInfo.Invalid, a missing gauge leaves it unreported, neither fails
// the scrape. vLLM reports no size of
// its CPU offload tier in blocks: CacheInfo.Offloading says the engine
// offloads, and CPUBlocks is filled only from the proposed
// vllm:kv_offload_config_info gauge (cpu_num_chunks × cpu_blocks_per_chunk)
// when an engine exports it. Package approx sizes its approximate index
// from it.
//
// A server with data-parallel engines exposes one series per engine (label
// engine="0", "1", …): an endpoint reads the series of its Rank, or all of
// them combined (queues summed, the highest KV-cache usage) when no series
// carries its rank.
package enginemetrics
