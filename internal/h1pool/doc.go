// Package h1pool is kvroute's HTTP/1.1 keep-alive client transport, shared
// by the gateway (its requests to the engines) and the render client (its
// requests to the renderers).
//
// It does what net/http's Transport does for plain-HTTP keep-alive traffic,
// with the request written and the response read on the calling goroutine.
// net/http's Transport hands every request to a writer goroutine and every
// response over from a reader goroutine per connection, which costs two
// ways:
//
//   - CPU: at hundreds of concurrent requests those goroutine switches and
//     channel operations cost a gateway more than its own work.
//   - Connections: net/http reuses a connection only if its writer
//     goroutine reports the request written within 50 ms of the response's
//     end (maxWriteWaitBeforeConnReuse in net/http/transport.go). On a
//     machine busy enough to hold that goroutine off longer, it closes the
//     connection and the next request dials a new one: connection churn at
//     steady state. Here the request is written whole before its response
//     is read, by the same goroutine, and reading the body to its end gives
//     the connection back to the pool before the last Read returns: no
//     timer and no other goroutine decide.
//
// Connections are kept per host:port in a LIFO stack (Config.MaxIdlePerHost,
// dropped after Config.IdleTimeout idle unless the warm-ahead keeps them,
// and then used in turn before a server's 5 s keep-alive closes them; a
// sweep on Config.Clock drops them even on a host no request comes to any
// more, and Retain at once, see sweep.go), peeked at for a close by the
// server before reuse (one non-blocking MSG_PEEK, where the platform has
// it), and optionally capped per host (Config.MaxConnsPerHost: requests past
// it wait, first come first served, for a connection given back or closed).
// A request that finds its reused connection closed by the server before any
// byte of answer is sent once more on a new connection, when it has no body
// or its GetBody is set. A request whose context ends while it holds a
// connection closes that connection (the only way to abort an HTTP/1.1
// request in flight), never pools it half-read; but when it ended before
// any byte of the request reached the connection (still in the write
// buffer, or not written yet), the connection is as it was when taken and
// goes back to the pool: there is nothing to abort.
// Other schemes (https) go to Config.Fallback, typically a net/http
// Transport. Config.WarmAhead dials ahead to the peak of requests in flight
// over the last Config.PeakWindow or two (see warm.go). Stats,
// Config.OnDial and Config.OnClose count dials and closes by CloseReason,
// so that a caller can tell churn from growth.
//
// Only what kvroute's clients use is supported: no proxies, no HTTP/2, no
// transparent compression, no 100-continue, no protocol upgrade (a 101
// Switching Protocols answer is an error and its connection closed, never
// pooled), of httptrace only WroteRequest.
package h1pool
