// Package e2e is kvroute's end-to-end test suite: scenarios that run the
// whole system on one machine, without GPUs, against a fleet of simulated
// vLLM engines that behave like vLLM where a router can tell (render routes,
// KV events over ZeroMQ with replay, prefix-cache metrics). The scenarios are
// library code: the package's tests run them (Run in fast mode, the accuracy
// step, RunReplicas against a real redis-server), and the one-command demo
// (go run ./examples/demo) runs the same code and prints what it sees.
//
// Run starts, in one process, Options.Engines simulated engines
// (simengine/server) on free loopback ports with --enable-scale-out and KV
// events (topic kv@<ip:port>@<model>, replay on), a gateway with a
// kvroute.Router (package gateway) and a round-robin gateway, and subscribes
// the router's index to the engines' events. Then:
//
//  1. Deployment verification: render.Check on every engine; one completions,
//     chat, Messages and Responses request through the gateway, each
//     tokenized by the router; and one request whose render the router's
//     counters must show (success +1, failures unchanged).
//  2. A burst of Options.BurstRequests chat requests sharing a
//     ~2,000-token system prompt, Options.Interval apart (3 s, so that the
//     router's 2 s speculative entries have expired and only the engines' KV
//     events keep the requests together). It prints each engine's
//     vllm:request_success_total and prefix-cache hit rate and the router's
//     predicted cached share, and fails unless one engine served at least 80%
//     of the burst with a hit rate of at least 70%.
//  3. The same streaming shared-prefix load (Options.LoadGroups system
//     prompts, Options.LoadConcurrency clients) through precise routing and
//     through round-robin, each from empty caches, and a table of the
//     engines' combined hit rate and the client's time to first token (to
//     the first streamed event) at p50 and p90. The engines' caches hold
//     about half of the prompts: precise routing splits the prompts between
//     the engines, round-robin makes each engine cache all of them.
//  4. A gateway restart on a warm fleet: two shared prompts are cached and
//     kept hot until the engines published more than twice their replay
//     buffer (Options.ReplayBufferSteps) since, then the gateway is
//     restarted once without and once with its index checkpoint (written
//     when it stopped), and the first requests after each restart show the
//     router's predicted cached share against the engines' hit rate.
//  5. Every router replica restarted with no checkpoint and no peer
//     (SnapshotResult): the shared prompts are aged beyond the replay
//     buffers again, then the gateway restarts once from the replay buffers
//     alone and once from the engines' KV-cache snapshots; the index's
//     coverage of the engines' cached blocks, the time it took, and the
//     first requests' predictions against the engines' hits after each.
//  6. The accuracy loop (AccuracyResult): a gateway of its own that reads
//     the engines' reported cached_tokens and compares them with its
//     predictions shows 0 error on the healthy fleet; then one engine's KV
//     events are suppressed (POST /sim/suppress_kv_events?on=true, no
//     sequence gap), and prompts extending one it caches are asked twice:
//     the engine reuses blocks the index never heard of, the gateway's
//     /metrics count missing entries and mark the endpoint inaccurate, and
//     the loop asks for a resync; once events flow again (?on=false), new
//     prompts are predicted exactly and the endpoint is accurate again.
//
// RunPD is the demo's prefill/decode step (go run ./examples/demo --pd): a
// workload of multi-turn chats sharing long system prompts and one-off long
// documents, streamed, through aggregated serving (four engines of role
// both), always-split (two prefill and two decode engines, a
// disagg/sidecar Handler in front of each decode engine, the gateway's
// disagg profile with nonCachedTokens -1, naming the prefiller in
// x-prefiller-host-port) and the decider (the same fleet, disagg's
// defaults), each on a fresh fleet. PDReport holds each policy's split
// rate, split by kind of request, the client's TTFT and inter-token time,
// and the sidecars' and decoders' counters; PDReport.Check is what must
// hold on any machine.
//
// The engines share one host, so each publishes its KV events on ports of
// its own; the demo's endpoints name those sockets (kvroute.Endpoint
// EventsAddress and ReplayAddress) and the router subscribes to them itself,
// exactly as the gateway binary does with an --endpoints-file.
package e2e
