// Package sim is kvroute's routing-quality simulation: a deterministic
// discrete-event simulation, on a virtual clock, of a fleet of simulated
// vLLM engines (package simengine) behind a gateway, comparing
// routing policies on the same traffic.
//
// The kvroute policy is the real kvroute.Router (render disabled, prompts
// supplied, index clock on virtual time) whose index is fed by the engines'
// own KV events through kvevents' real path: each engine step's event batch
// is encoded in the current vLLM wire format, held for Config.EventDelay,
// then decoded and applied. The peers' own policies run beside it on the
// same deliveries: Dynamo's KV-router cost model (tier-weighted overlap
// credits against prefill load, plus active decode blocks, with a
// short-lived side index of its own decisions) and the SGLang model
// gateway's cache_aware policy (imbalance thresholds, then a prefix match
// above a ratio threshold, else the least load) with an approximate
// tree of its own decisions, and on its event-driven path (the longest
// cached prefix per the events, else the least load), and LMetric
// (uncached prompt tokens × (in-flight requests + 1), Dynamo's and SGLang's
// lmetric; lmetric.go). Baselines are
// kvroute's previous default (prefill-only load), a cache-blind approximate
// prefix router (it learns only from its own decisions, with a TTL),
// least-load (token load only) and round-robin.
//
// Every run also computes a capacity bound on its own trace: Belady's
// optimal replacement over one pooled cache the size of the fleet's total
// KV cache, which no routing can out-reuse, and the LRU-residency bound
// (LRUBoundHitRate: the same less the blocks no request will hit that
// engines with vLLM's LRU must hold anyway), next to the infinite-cache
// ceiling and a pooled-LRU reference (not a bound: partitions of a stream
// over LRU caches can beat one pooled LRU cache); Sweep adds a one-engine
// reference (OneEngine: the fleet merged into one engine, so with the
// engines' own replacement) and every Result carries Misses, the
// decomposition of the gap to the bound into LRU residency, replacement,
// placement, routing and in-flight shares, observed from the engines' caches at each arrival. The workloads are shared-prefix,
// multi-turn chat, no-reuse, zipf-drift (skewed group popularity whose
// ranking moves mid-run) and heterogeneous (two engine speeds); Trace
// replays a window of a Mooncake trace (ReadMooncakeTrace, TraceWorkload).
//
// ReplicaSweep runs R kvroute Routers as gateway replicas behind a
// round-robin spread (Config.RoundRobinReplicas), each accounting only its
// own load or, with Config.SharedState, sharing load and decisions through
// package cluster over virtualRedis: an in-process store on the virtual
// clock that implements only the operations the cluster package performs,
// used only in this simulation (sharedstate.go documents the delays).
// SeedSweep compares one replica with R sharing state over many traffic
// seeds (the mean TTFT p90 paired by seed, with a bootstrap interval): above
// full load a single run's p90 is chaotic, so that comparison is the one
// that can resolve a few percent. DecomposeReplicas runs that comparison
// again with parts of the propagation switched off (SharedExact) and a
// one-router control, to say what R replicas lose and to what.
//
// Run simulates one policy on one Config; Sweep runs a grid of workloads,
// loads and policies in parallel (results do not depend on the
// parallelism); WriteMarkdown and WriteSVG render the tables and the TTFT
// p90 chart that `go run ./bench/cmd/routesim` writes (into out/routesim by
// default). The model's assumptions are listed in bench/README.md.
//
// RunOverloadStudy is the admission-under-overload study (overload*.go):
// interactive traffic of two tenants and sheddable batch traffic at
// multiples of the fleet's measured capacity, run through the real
// admission.Controller (its queue driven deterministically on a stepped
// virtual clock, overload_admit.go), through kvroute without admission,
// through Dynamo's router queue as its documentation and scheduler-queue
// source describe it (DynamoQueueConfig lists what is modelled and what is
// not), and through the peers' policies, which have no queue.
//
// RunPDStudy is the prefill/decode disaggregation study (pd*.go): chat
// sessions on long shared system prompts mixed with one-off long
// documents, served by a prefill pool and a decode pool (or the same GPUs
// aggregated) of engines modelled as the rest of the simulation models
// vLLM plus the KV-transfer states (pd_engine.go: a prefiller holds its
// blocks until the decoder has pulled them; a decoder pulls what it lacks
// at a stated bandwidth, then publishes the blocks as vLLM does), through
// the real kvroute.Router as aggregated, always-disaggregated and with
// the P/D decider as its Profile, and through Dynamo's conditional
// disaggregation (pd_dynamo.go lists what is modelled). RunPDSweep varies
// the pools' sizes and the decider's knobs.
package sim
