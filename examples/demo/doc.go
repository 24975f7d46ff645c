// Command demo shows kvroute's precise prefix-cache routing on one machine,
// without GPUs, in six steps and about 80 s on a 2-core machine:
//
//	go run ./examples/demo            # the full demo
//	go run ./examples/demo --fast     # the same in a few seconds
//	go run ./examples/demo --hold     # keep the engines and gateway up afterwards
//
// It starts two simulated vLLM engines (free loopback ports, render routes
// on, KV events over ZeroMQ with replay) and the gateway in this process,
// then (1) verifies the deployment (render check on each engine, one
// completions, chat, Messages and Responses request through the gateway, the
// router's render counters), (2) sends 10 requests sharing a ~2,000-token
// system prompt 3 s apart and prints each engine's vllm:request_success_total
// and prefix-cache hit rate plus the router's predicted cached share, (3)
// runs a short shared-prefix load through precise routing and through
// round-robin and prints a comparison table (engine hit rate, client TTFT
// p50/p90), and (4) restarts the gateway on a warm fleet whose shared prompts
// are older than the engines' replay buffer, without and with the index
// checkpoint, printing the router's predicted cached share against the
// engines' hit rate right after each restart, (5) restarts it with no
// checkpoint and no peer, once from the engines' replay buffers alone and
// once from their KV-cache snapshots (vLLM's snapshot_endpoint), printing
// the index's coverage of the engines' caches and the first requests'
// predictions after each, and (6) shows the accuracy
// loop: 0 prediction error on the healthy fleet, then one engine's KV events
// suppressed (POST /sim/suppress_kv_events) and the loop catching it in the
// gateway's /metrics (missing entries, the endpoint marked inaccurate, a
// resync), and exact predictions again once its events flow. It exits with
// status 1 when a step fails: among others, unless the verification passed
// and one engine served most of the burst with a high hit rate.
//
// Flags:
//
//	--fast             short burst interval and load (a few seconds)
//	--interval d       time between the burst's requests (default 3s; --fast 100ms)
//	--load-requests n  requests per policy in the comparison (default 240; --fast 48)
//	--engines n        number of simulated engines (default 2)
//	--engine-blocks n  KV-cache blocks per engine (default 128: about four of the comparison's prompts)
//	--load-groups n    distinct shared system prompts in the comparison (default 8)
//	--hold             keep everything running after the demo until Ctrl-C
//	--verbose          print the components' logs to standard error
//	--replicas 2       the active-active demo instead (needs redis-server on PATH)
//	--pd               the prefill/decode step instead (with --fast: about 10 s)
//
// With --replicas 2 (e2e.RunReplicas) it starts its own redis-server on
// a free loopback port, the engines, and two gateways sharing load and
// decisions through it (one in this process, one a child process: this
// binary re-executed), sends a burst of one new prefix round-robin over
// both faster than an engine prefills it (only the shared decisions can
// keep it on one engine), then kills the child with SIGKILL while it
// carries open streams and shows the surviving gateway dropping the dead
// replica's load when its lease expires and routing on. It stops every
// process it started; without redis-server it exits with status 1 and says
// what to install.
//
// With --pd (e2e.RunPD) it runs the prefill/decode disaggregation step
// instead: the same workload (multi-turn chats sharing long system prompts,
// and one-off long documents, streamed) under three policies, each on a
// fresh fleet of four simulated engines and a gateway: aggregated serving
// (four engines of role both, precise routing), always-split (two prefill
// and two decode engines, a routing sidecar, package disagg/sidecar's
// handler, in front of each decode engine, and the gateway's disagg
// profile with nonCachedTokens -1) and the decider (the same fleet,
// disagg's defaults). It prints a table of each policy's split rate, the
// client's time to first token (p50, p90) and inter-token time (mean,
// p99), and exits with status 1 unless every request succeeded, aggregated
// serving split none, always-split all and the decider some but not all.
// It stops each policy's engines, sidecars and gateway before the next.
//
// A flag the chosen variant does not read is refused, naming it: --engines,
// --interval, --load-requests and --load-groups with --pd (four engines of
// its own, no burst, no comparison), the last three with --replicas 2 (a
// burst of its own, no comparison).
//
// The logic lives in kvroute's end-to-end suite, the importable package
// github.com/kvroute/kvroute/e2e, whose tests run the same scenarios.
package main
