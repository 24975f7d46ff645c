// Command gwload measures the gateway path under load: a closed-loop load
// generator sends completions requests with a shared prompt prefix (2,000
// tokens by default) straight to two fast simulated vLLM engines
// (simengine/server) and through kvroute's gateway
// (package gateway), at several concurrencies, and reports
// requests/s, p50/p99 latency and CPU per request of every process.
//
// Usage (from the module root):
//
//	go run ./bench/cmd/gwload [-concurrency 4,16,64,256] [-duration 5s] [-out dir]
//	go run ./bench/cmd/gwload -baseline /tmp/gwload-old -rounds 3   # before/after, interleaved
//	go run ./bench/cmd/gwload -fleet 1000                 # event pool at fleet scale
//	go run ./bench/cmd/gwload -targets direct,precise,precise-once -concurrency 64,256 -rounds 3 -duration 8s -engine-profile
//	                                                      # throughput ceiling against direct, engine 0 profiled
//
// The engines, the gateway and the load generator each run in their own
// process (gwload re-executes itself with GWLOAD_ROLE set), so that the CPU
// each one burns over a measured window can be read from /proc/<pid>/stat
// and divided by the requests completed in it: the gateway's CPU per
// request is not mixed with the engines' or the load generator's. Targets:
// direct (the load generator spreads requests over the engines itself),
// precise (the gateway with a kvroute.Router: render on the engines,
// KV-event index, affinity and load scoring) and round-robin (the gateway
// without render or routing). Each cell also reports how many TCP sockets
// to the engines' ports entered TIME_WAIT during its window (machine-wide)
// and, exactly, how many of the engines' connections closed in it and which
// side closed them first (the client: a gateway's pool, the load
// generator; or the engine): closed and redialed connections, churn.
// Before each cell that follows another target's (or its baseline's) the
// engines close every connection still open, the idle ones the cells
// before left (a load generator's, a gateway's pools): their keep-alive
// timeout (vLLM's 5 s) would close them anyway, and in the middle of a
// later cell's window, counted as that target's churn. So such a cell's
// warmup dials its own connections, and a window sees only its target's.
//
// It writes <out>/gwload.md (default out/gwload under the module root,
// which git ignores). With -attribute (the default) every gateway window is
// CPU-profiled, the gateway's render client marks its HTTP attempts (and the
// render connections they dial) with a pprof goroutine label through a
// trace.TracerProvider that records nothing, and the report splits the
// gateway's CPU per request into render (those labels and every sample
// with a render client method on its stack) and the rest; the window's
// allocations and GC CPU come from the gateway's runtime/metrics, and the
// profiles (gateway-<target>-c<N>.pprof and two allocation snapshots) stay
// in <out>. With -baseline, each gateway target also runs with its gateway
// child taken from another gwload binary (built from an earlier revision of
// the gateway with this revision's gwload), and -rounds N runs every
// (target, concurrency) cell N times, alternating the order, so that before
// and after interleave on the same engines; the report then adds a
// before/after table of the medians.
//
// The report's table of each gateway target against direct gives, per
// round, its requests/s over direct's from the same round and their median,
// the ratio CPU alone predicts (direct's CPU per request over the target's,
// all processes), which a machine shared with other work does not bias the
// way it biases rates, and how the target's CPU per request splits between
// the engines, the gateway and the load generator. -engine-profile also
// CPU-profiles the first engine in every window.
//
// With -fleet N it instead measures one kvevents.Pool in a child process
// subscribed over loopback to N publish.Publishers: memory idle, then CPU,
// memory, drops and sequence gaps while every publisher sends -fleet-rate
// messages/s, and writes <out>/fleet.md.
//
// Figures depend on the machine and its load; the report records the CPU,
// GOMAXPROCS, Go version and load average, and says when the machine was
// shared.
package main
