package gateway

import "github.com/kvroute/kvroute/internal/h1pool"

// newUpstreamTransport returns the Handler's own HTTP/1.1 client for the
// engines (internal/h1pool, shared with the render client): the request is
// written and the response read on the handler's goroutine, where net/http's
// Transport hands both through a writer and a reader goroutine per
// connection, which at hundreds of concurrent requests costs the gateway
// more CPU than its own work (and, on a CPU-starved machine, retires
// connections whose writer goroutine reported late). Connections are kept
// per engine in a LIFO stack (up to idlePerHost), peeked at for the
// engine's close before reuse, and dropped after 90 s idle unless the
// warm-ahead keeps them (below). A request that finds its reused
// connection closed by the engine before any response byte is sent once
// more on a new connection: net/http's Transport resends only idempotent
// requests there; the gateway resends its POSTs too, because the
// client has received nothing yet and the usual cause is an engine closing
// an idle keep-alive connection as the request went out. An engine that
// read the request and then died without a byte of answer is sent it
// again, which costs one duplicate inference and nothing else. https
// engines go to a net/http Transport (newTransport).
//
// Warm-ahead is on: the pool dials ahead, in the background, to the peak of
// inference requests in flight in the Handler, counted once their body is
// read (which raises the transport's peak: all engines' together, the most
// one engine can get; a client still sending its body raises nothing),
// so that once a peak has been seen a request at that concurrency finds an
// idle connection (see internal/h1pool's warm.go). The pool keeps those
// connections however long they are idle: an engine that gets fewer
// requests at once than that peak leaves some of them unused, and closing
// them after 90 s only had the warmer dial them again (connection churn at
// a steady load). An engine closes them itself after its own keep-alive
// timeout (vLLM: 5 s), so a kept connection at the bottom of the stack is
// used again, before the top, once it has been idle 2 s.
func newUpstreamTransport(idlePerHost int) *h1pool.Transport {
	return h1pool.New(h1pool.Config{MaxIdlePerHost: idlePerHost, Fallback: newTransport(idlePerHost), WarmAhead: true})
}
