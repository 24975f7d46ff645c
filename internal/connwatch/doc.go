// Package connwatch counts what net/http's server does to client
// connections without telling any handler: it closes a connection whose
// request header did not arrive within the server's ReadHeaderTimeout, and
// it answers a request it cannot read (a malformed request line or header,
// a header over the size limit, an unsupported HTTP version) with a 4xx or
// 5xx of its own. Both happen silently, so a Watcher wraps the server's
// listener and watches each connection's reads, deadlines and writes: a
// read that times out while a header is due is a header timeout, and an
// error response (4xx or 5xx) written while a header is due is a refusal
// (net/http's own 200 to "OPTIONS *" is not). Under TLS the watched
// connection is the one under the TLS connection, where the refusal, being
// encrypted, is known by when net/http writes it. The kvroute gateway, the
// P/D routing sidecar and kvroute-epp's metrics port count them with it.
//
// Ownership: a watched connection's phase is written by the connection's
// net/http goroutine (its reads, its deadlines, the ConnState hook, the
// handler's start) and read by whichever of them times out or writes; it
// is atomic. A Watcher starts no goroutine.
package connwatch
