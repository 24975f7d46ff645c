// Command report runs kvroute's headline benchmarks and writes
// bench/RESULTS.md: the date, CPU, GOMAXPROCS, Go version and machine load,
// then each figure beside its design target (Targets), the scaling ladders
// and the raw output.
//
// Usage (from anywhere inside the module):
//
//	go run ./bench/cmd/report [-benchtime 1s] [-count 3] [-scale=true] [-short] [-note "…"] [-out dir]
//
// It executes
//
//	go test -run '^$' -bench <headline set> -benchmem -benchtime <t> -count <n> ./bench
//
// in the module root with the environment's GOMAXPROCS, parses the standard
// benchmark output (the median over -count runs is reported) and writes
// RESULTS.md into the -out directory: by default out/report under the module
// root, which git ignores, so a run never dirties the checkout; -out bench
// replaces the committed bench/RESULTS.md. -from parses a saved output
// instead of running. When the load
// average is above half the CPU count the report says the machine was
// shared, since every figure is then pessimistic.
package main
