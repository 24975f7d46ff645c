// Package bench is kvroute's cross-package benchmark suite and the home of
// its routing-quality simulation.
//
// Users choose a router by two numbers: how little it costs per request and
// how much time to first token it saves. This package answers the first:
//
//	go test -run '^$' -bench . -benchmem ./bench
//
// runs the headline benchmarks under stable names (Keys/tokens=2048,
// Match/tokens=2048/endpoints=64, Match/tokens=32768/endpoints=256,
// Apply/blocks=16, Pick/tokens=2048/endpoints=64, Render,
// SubscriberThroughput, Memory) plus two scaling ladders
// (ScaleMemberships, ScaleEndpoints). Every benchmark checks what it
// computed, reports allocations and a domain metric (ns/block, blocks/s,
// msgs/s, bytes/membership). `go run ./bench/cmd/report` runs the headline
// set and writes bench/RESULTS.md beside the targets of the design.
//
// The second number comes from `go run ./bench/cmd/routesim`, a
// deterministic discrete-event simulation of a fleet of simulated vLLM
// engines driven through the real kvroute.Router (package
// bench/internal/sim; its assumptions are in bench/README.md).
//
// The exported helpers below build the deterministic prompts and warm
// indexes the benchmarks share; they are exported so that the benchmarks,
// the examples and anyone reproducing a figure build exactly the same data.
package bench
