// Package clockctx is context.WithTimeout on a telemetry.Clock: the
// overall deadline of a component's own work (a replay, a snapshot load),
// which package telemetry says runs on the component's clock, so that a
// test on a manual clock ends it by advancing the clock, not by waiting
// for wall time. Deadlines handed to sockets stay on wall time and are not
// made here. Sleep is the pause between attempts on the same clock, cut
// short when the context ends.
package clockctx
