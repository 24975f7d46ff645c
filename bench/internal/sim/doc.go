// Package sim is kvroute's routing-quality simulation: a deterministic
// discrete-event simulation, on a virtual clock, of a fleet of simulated
// vLLM engines (examples/simengine/engine) behind a gateway, comparing
// routing policies on the same traffic.
//
// The kvroute policy is the real kvroute.Router (render disabled, prompts
// supplied, index clock on virtual time) whose index is fed by the engines'
// own KV events through kvevents' real path: each engine step's event batch
// is encoded in the current vLLM wire format, held for Config.EventDelay,
// then decoded and applied. The other policies are a cache-blind
// approximate prefix router (it learns only from its own decisions, with a
// TTL), least-load (token load only) and round-robin; an oracle bound on
// reusable prefix tokens is computed on the same trace.
//
// Run simulates one policy on one Config; Sweep runs a grid of workloads,
// loads and policies in parallel (results do not depend on the
// parallelism); WriteMarkdown and WriteSVG render the tables and the TTFT
// p90 chart that `go run ./bench/cmd/routesim` writes under bench/results.
// The model's assumptions are listed in bench/README.md.
package sim
