// Command routesim runs kvroute's routing-quality simulation and writes its
// tables and charts: a deterministic discrete-event simulation of a fleet
// of simulated vLLM engines, on a virtual clock, driven through the real
// kvroute.Router and compared with an approximate prefix router,
// least-load and round-robin on the same traffic.
//
// Usage (from the module root):
//
//	go run ./bench/cmd/routesim [flags]
//
// It writes <out>/routesim.md (tables per workload and load, target
// evaluation), <out>/routesim-<workload>.svg (TTFT p90 against load per
// policy) and <out>/routesim.json (every result). The model's assumptions
// are documented in bench/README.md.
package main
