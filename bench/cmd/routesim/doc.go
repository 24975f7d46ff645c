// Command routesim runs kvroute's routing-quality simulation and writes its
// tables and charts: a deterministic discrete-event simulation of a fleet
// of simulated vLLM engines, on a virtual clock, driven through the real
// kvroute.Router and compared on the same traffic with the peers' own
// policies (Dynamo's KV-router cost model, SGLang's cache_aware with its
// approximate tree or with engine events), an approximate prefix router,
// least-load, round-robin and kvroute's previous default, against a
// capacity bound (Belady's optimal replacement over one pooled cache the
// size of the fleet's KV cache).
//
// Usage (from the module root):
//
//	go run ./bench/cmd/routesim [flags]
//
// It writes <out>/routesim.md (tables per workload and load, target
// evaluation), <out>/routesim-<workload>.svg (TTFT p90 against load per
// policy) and <out>/routesim.json (every result). <out> defaults to
// out/routesim under the module root, which git ignores; -out bench/results
// replaces the committed results. The model's assumptions are documented in
// bench/README.md.
package main
