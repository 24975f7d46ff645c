// Package telemetry is the one observability bundle every kvroute package
// takes: a Set of a Prometheus registerer, a structured logger, an
// OpenTelemetry tracer provider and a clock.
//
// Every package's Options (or its config struct's dependency part) embeds a
// Set as an anonymous field, so a host wires observability the same way
// everywhere:
//
//	opts := kvroute.Options{Set: telemetry.Set{Registerer: reg, Logger: log}}
//
// The zero Set is valid and quiet: a nil Registerer registers nothing, a nil
// Logger discards, a nil TracerProvider traces nothing, and a nil Clock is
// the wall clock. Packages read the Set only through its methods (Log,
// Tracer, Now, Clk, Register), which apply those defaults, so the policy is
// written once, here.
//
// # Registration
//
// Register is the one registration policy: every collector of a component
// is registered through it at construction; if one fails (a name already
// taken, typically by a second component built on the same registry without
// distinguishing labels), the ones registered by that call are unregistered
// again and the error is returned, so a failed constructor leaves the
// registry as it found it.
//
// The policy every component follows: A nil Registerer registers nothing.
// New registers every collector of the component through Set.Register, all
// or none (New fails and leaves nothing registered). Close unregisters
// exactly what New registered, so a closed component can be built again on
// the same registry. A component that deliberately reuses collectors
// another instance already registered on the same registry (reusing them on
// prometheus.AlreadyRegisteredError, so several instances share one
// registry) unregisters on Close only the collectors it registered itself,
// never the shared ones it reused.
//
// # Clocks
//
// Clock is what a component with timers runs on: Now, timers, tickers and
// AfterFunc. Wall is the real clock. Manual is a clock for tests that moves
// only when told (Advance), firing every timer that falls due in order, so
// a test of a timeout waits for the event it causes, not for wall time.
//
// What runs on a component's Clock: its periodic work and its own timeouts
// (sweeps, refreshes, debounces, heartbeats, backoffs, a replay's overall
// timeout) and the timestamps its behaviour depends on (expiry, leases,
// rate limits). What stays on wall time, and says so where it is set:
// deadlines handed to the OS or to a network client (net.Conn read and
// write deadlines, the Redis client's operation timeouts, HTTP request
// contexts), which the kernel and the peers measure in wall time anyway,
// and durations measured only to be reported, such as the lookup latency
// histograms of CPU work.
package telemetry
