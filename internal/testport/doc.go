// Package testport gives kvroute's tests loopback TCP ports outside the
// kernel's ephemeral range, for listeners a test closes and starts again on
// the same address (an engine, a publisher or a Redis that restarts), for
// addresses a test picks before the listener that uses them exists, and for
// addresses that must refuse connections: one nothing listens on (Addr), or
// a server's that the test stops (Listen).
//
// A port from a bind to port 0 is drawn from the ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768–60999 by default), which
// is also where the kernel takes the source port of every outgoing
// connection and of every other process's bind to port 0. Once a test
// closes such a listener, any socket on the machine (another test package
// runs beside it) can take the port before the restart binds it again, and
// the restart fails with "address already in use"; a client re-dialling the
// closed port can even connect to itself when the kernel picks that same
// port as its source port. Find draws instead a random port between Min
// and the range's low end and checks that it binds: the kernel never hands
// such a port out by itself, so it stays free while a listener is down
// unless another test draws the same number.
//
// That chance is small but not zero (another process drawing from the same
// ~22,000 ports, or something on the machine listening on a fixed port), so
// a caller that binds the port again later should retry briefly on
// EADDRINUSE where it can. Within one process Find never returns a port it
// returned among its last 4,096 answers, so two ports a test asks for in a
// row differ.
package testport
