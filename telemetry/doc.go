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
// # Clocks
//
// Clock is what a component with timers runs on: Now, timers, tickers and
// AfterFunc. Wall is the real clock. Manual is a clock for tests that moves
// only when told (Advance), firing every timer that falls due in order, so
// a test of a timeout waits for the event it causes, not for wall time.
package telemetry
