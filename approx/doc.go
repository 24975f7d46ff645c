// Package approx is kvroute's approximate prefix index for engines whose
// KV events are absent: off, broken, not supported by the engine, or not
// caught up yet. For such an endpoint the router cannot know what the
// engine holds, so it remembers what it sent there: each decision records
// the request's block keys under the chosen endpoint (Index.Record), and
// later requests match against those entries (Index.Match) as if the
// engine had reported them.
//
// Approximate entries are bounded the way the engine's cache is, not by an
// arbitrary count: each endpoint's entries are a least-recently-routed list
// sized to the engine's capacity, its GPU blocks plus the blocks it offloads
// to CPU memory when it does (Capacity; an index sized to GPU memory alone
// forgets prefixes an offloading engine still serves, the bug of
// llm-d/llm-d-router#1650).
//
// The capacity is read from the engine itself when the index is given a
// CapacitySource (Options.Capacities; the gateway adapts package
// enginemetrics' scrape of vLLM's vllm:cache_config_info): its GPU blocks
// (num_gpu_blocks, or the group-aware kv_cache_size_tokens) plus its CPU
// offload tier when the engine reports that tier's size. vLLM reports
// only that it offloads (kv_offloading_size, in GiB), not how many blocks
// that holds, so for such an engine Config.Capacity.CPUBlocks supplies the
// CPU tier (source "engine+config_cpu"); with none configured the index is
// sized to GPU blocks, and says so (fallback "offload_unsized").
// Config.Endpoints override the engine; an engine whose metrics cannot be
// read (never, or not within Config.TTL), that exports no cache
// configuration, or an invalid one, gets Config.Capacity. Every fallback
// is counted (kvroute_approx_capacity_fallbacks_total{reason}, once per
// endpoint and episode), logged, and shown per endpoint
// (EndpointState.CapacitySource and CapacityFallback,
// kvroute_approx_endpoint_capacity_blocks{endpoint, source}).
//
// Entries expire Config.TTL after the last
// decision that routed them (traffic the router does not see evicts too),
// and the whole index is bounded by Config.MaxBytes of accounted memory,
// shared evenly among the endpoints holding entries.
//
// The index also keeps each endpoint's Mode, the label every routing
// decision carries: precise when the endpoint's KV-event stream is live,
// approximate when it is not and the index is enabled, blind when neither.
// The modes are read from the router's event pool (Binding.Live) at most
// every Config.Refresh, on the pick path but never per request; when an
// endpoint's events become live its approximate entries are dropped and it
// is routed precisely from then on. Showing the mode per decision, per
// endpoint (kvroute_approx_endpoint_mode, the gateway's status and
// readiness pages) is the point: a benchmark that meant to measure precise
// routing and silently ran on approximate entries because the engines never
// published (ai-dynamo/dynamo#11473) is visible at once.
//
// Peers: llm-d's approx-prefix-cache-producer keeps a per-pod LRU (31,250
// blocks by default, auto-tuned from GPU block metrics only); Dynamo's
// --no-router-kv-events mode predicts cache state from routing decisions
// with a TTL (120 s by default); SGLang's cache_aware policy keeps a
// per-worker radix tree of routed text pruned to a size bound. This package
// keeps kvroute's chained block keys (a key names its whole prefix), so a
// map per endpoint matches a prefix without a tree.
//
// Concurrency: every method is safe for concurrent use; each endpoint's
// entries have their own lock, and the index starts no goroutines (expiry
// runs in Record and in the mode refreshes), so it needs no Close.
package approx
