// Command routesim runs kvroute's routing-quality simulation and writes its
// tables and charts: a deterministic discrete-event simulation of a fleet
// of simulated vLLM engines, on a virtual clock, driven through the real
// kvroute.Router and compared on the same traffic with the peers' own
// policies (Dynamo's KV-router cost model, SGLang's cache_aware with its
// approximate tree or with engine events), an approximate prefix router,
// least-load, round-robin and kvroute's previous default, against a
// capacity bound (Belady's optimal replacement over one pooled cache the
// size of the fleet's KV cache) and a one-engine reference (the same
// traffic on one simulated engine holding the fleet's whole cache and
// compute), with kvroute's misses decomposed into the engines' replacement,
// placement over the engines, routing and in-flight shares.
//
// Usage (from the module root):
//
//	go run ./bench/cmd/routesim [flags]
//
// The router-replica sweep (-replica-sweep, on by default;
// -replica-sweep-only runs it alone into routesim-replicas.md and .json)
// runs R = 1, 2, 4 (-replica-counts) real kvroute Routers behind a
// round-robin spread on shared-prefix traffic at every load, once with each
// replica accounting only its own in-flight load and once sharing load and
// decisions through package cluster. In this deterministic virtual-clock run
// the cluster's Redis is replaced by an in-process store on the virtual
// clock (bench/internal/sim's virtualRedis, a cluster.Store driven through
// cluster.NewManual), with the propagation delays modelled in virtual
// time: -replica-refresh and -replica-read (the load's staleness bound is
// their sum plus -replica-redis-rtt), -replica-publish-interval plus one
// round trip for decisions and load changes. Outside this simulation the
// cluster package always talks to a real Redis. -replica-seeds 1,2,3 runs
// the sweep for several seeds into one report; -replica-stat-seeds N adds,
// for the loads above 1 (-replica-stat-loads), the comparison of R = 1 with
// the shared rows over traffic seeds 1..N (the ratio of mean TTFT p90s,
// paired by seed, with a 95 % bootstrap interval), which is what can
// resolve 5 % where one overloaded run's p90 is chaotic, and on how many
// seeds R replicas stayed within 5 %. -replica-decompose
// publish-at-once,exact-load,exact-all,control runs those seeds again per
// part: decisions and load changes published at once, every pick seeing
// the peers' exact load, everything exact (one router's decisions), and a
// control of one router whose KV events arrive 1 µs later
// (-replica-exact-load and -replica-exact-all switch the same parts off for
// a whole run). -replica-leader-rtt D is an experiment, not what package
// cluster does: replica 0 picks for every replica, each request reaching
// another replica picked D later and its load changes reaching replica 0
// D/2 after they happen (-replica-leader-instant: at once).
// The committed bench/results/routesim-replicas.md is
//
//	go run ./bench/cmd/routesim -replica-sweep-only -loads 1.5 -replica-counts 1,4 -replica-seeds 1 -replica-stat-seeds 100 -replica-decompose exact-load,control -out bench/results
//
// -peer-stat-seeds N runs only kvroute and the peers' policies on every
// workload at the loads of at least half capacity over traffic seeds 1..N,
// into <out>/routesim-peers.md and .json: each row's mean TTFT p90 per
// policy, kvroute's against the best peer's with a 95 % paired bootstrap
// interval, and on how many seeds kvroute was below every peer. One
// overloaded run's p90 is chaotic, so this is the comparison that says
// whether a "no" in routesim.md's single-seed table is a policy gap. The
// committed bench/results/routesim-peers.md is
//
//	go run ./bench/cmd/routesim -peer-stat-seeds 8 -out bench/results
//
// -tie-seed N varies only the policies' own random draws (tie-breaks,
// exploration; config TieSeed) on the same traffic. Where two policies
// differ by less than a policy's own spread over tie seeds, as on no-reuse
// at and above 0.75 (Dynamo's mean p90 over seeds 1–8 at 0.75 moves by
// +0.09 % to +0.33 % between tie seeds 0 and 1–3), the comparison over
// traffic seeds alone does not separate them:
//
//	go run ./bench/cmd/routesim -peer-stat-seeds 8 -workloads no-reuse -loads 0.75 -tie-seed 1 -out <dir>
//
// -load-tie-tolerance F runs every kvroute configuration with
// Config.LoadTieTolerance F (an experiment, off by default: picks decided
// by load tie within F times the best candidate's uncached tokens, broken
// by the request's prefix hash). bench/README.md ("Router replicas") gives
// its figures:
//
//	go run ./bench/cmd/routesim -replica-sweep-only -loads 1.5 -replica-counts 1,4 -replica-seeds 1 -replica-stat-seeds 100 -load-tie-tolerance 2 -out <dir>
//
// -kvroute-peer-load-from-metrics gives every kvroute router an estimate of
// the other gateway replicas' load on each engine from its waiting and
// running requests, scraped every 50 ms of virtual time
// (enginemetrics.PeerLoads, the gateway's peerLoadFromMetrics; an
// experiment, off by default). Its comparison with the peers is committed
// in bench/results/peer-load-from-metrics:
//
//	go run ./bench/cmd/routesim -peer-stat-seeds 8 -workloads multi-turn,shared-prefix,zipf-drift,heterogeneous,no-reuse -kvroute-peer-load-from-metrics -peer-stat-reuse bench/results/routesim-peers.json -peer-stat-reuse-policies dynamo,sglang,sglang-events,lmetric -out bench/results/peer-load-from-metrics
//
// -trace FILE replays a Mooncake trace (the FAST'25 JSONL format; the public
// traces are in the kvcache-ai/Mooncake repository under
// FAST25-release/traces/) instead of the synthetic workloads: prompts built
// from its hash IDs, arrivals at its timestamps scaled to each load, its
// output lengths, on -engines engines of -blocks KV blocks (7,168 unless
// given). -trace-start and -trace-requests replay a contiguous window. It
// writes <out>/routesim-trace.md, .json and .svg, or with -peer-stat-seeds
// <out>/routesim-trace-peers.md and .json.
//
// -overload runs only the admission-under-overload study into
// <out>/routesim-overload.md and .json. -overload-kvroute <policy> runs its
// kvroute rows with a kvroute experiment policy (kvroute-crowding: the
// crowding rule without its bound; kvroute-bounded: its bound never
// lifted on severe crowding; kvroute-no-crowding: the rule off),
// -overload-policies limits the policies run and -overload-capacity R
// fixes the capacity the loads multiply instead of measuring it (the
// measurement runs kvroute's configuration on a backlogged fleet, so it
// moves with the policy: 119.0 requests/s with the default, 133.8 with
// kvroute-crowding). Comparing policies at the same offered rates:
//
//	go run ./bench/cmd/routesim -overload -overload-kvroute kvroute-crowding -overload-policies kvroute+admission,kvroute -overload-capacity 119.0405333015892 -out <dir>
//
// -pd runs only the prefill/decode disaggregation study into
// <out>/routesim-pd.md and .json: a prefill and a decode pool (-pd-prefill,
// -pd-decode; aggregated runs the same number of engines of role both),
// chat sessions on long shared system prompts plus one-off long documents
// (-pd-requests), at multiples of the aggregated fleet's measured capacity
// (-pd-loads), for aggregated, always-disaggregated, kvroute's decider
// (-pd-threshold, -pd-max-prefill-queue) and Dynamo's conditional
// disaggregation (-pd-dynamo-isl, -pd-dynamo-ratio): TTFT p50/p90, ITL,
// output tokens/s, the split rate and the target row by row, with
// -pd-seeds N each row over seeds 1..N and the reachability bound of the
// rows no split document can meet, then a sensitivity sweep over pool
// sizes and the decider's knobs (-pd-sweep). The committed
// bench/results/routesim-pd.md is
//
//	go run ./bench/cmd/routesim -pd -pd-seeds 4 -pd-sweep=false -out bench/results
//
// It writes <out>/routesim.md (tables per workload and load, target
// evaluation), <out>/routesim-<workload>.svg (TTFT p90 against load per
// policy) and <out>/routesim.json (every result). <out> defaults to
// out/routesim under the module root, which git ignores; -out bench/results
// replaces the committed results. The model's assumptions are documented in
// bench/README.md.
package main
