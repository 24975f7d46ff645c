package sidecar

import (
	"net/http"

	"github.com/kvroute/kvroute/internal/stallwrite"
)

// stallGuard returns w with every write bounded by
// Config.ResponseWriteTimeout (package stallwrite): the proxy writes the
// decoder's response through it, and a client that takes nothing for that
// long has its response cut (the proxy's copy fails, the decoder request is
// closed, and net/http aborts the connection) and is counted as
// client_stalled. The deadline is armed on w's connection when the
// response starts (its final header, or a first write or flush), not
// before: it bounds the wait for the client, and the decoder may take
// longer than it to answer (a non-streamed completion is answered once it
// is generated whole). The caller clears it with Stop when the response
// ends, so that the next request on a keep-alive connection starts
// without it.
func (h *Handler) stallGuard(w http.ResponseWriter) *stallGuarded {
	return &stallGuarded{ResponseWriter: w, h: h}
}

// stallGuarded is a ResponseWriter whose writes wait at most
// Config.ResponseWriteTimeout each for the client. The proxy's goroutine
// starts it (WriteHeader happens before the proxy's flushing timer is
// set), and the proxy serializes its writes and flushes.
type stallGuarded struct {
	http.ResponseWriter
	sw      stallwrite.Writer
	h       *Handler
	started bool
	stalled bool
}

// start arms the deadline, once.
func (g *stallGuarded) start() {
	if !g.started {
		g.started = true
		g.sw = stallwrite.Start(g.ResponseWriter, g.h.x.cfg.ResponseWriteTimeout)
	}
}

// WriteHeader starts the deadline at the final header; an informational
// (1xx) one is written without it, the decoder's answer yet to come.
func (g *stallGuarded) WriteHeader(code int) {
	if code >= http.StatusOK {
		g.start()
	}
	g.ResponseWriter.WriteHeader(code)
}

// Write writes p under the deadline, counting the first write the
// deadline cut.
func (g *stallGuarded) Write(p []byte) (int, error) {
	g.start()
	n, err := g.sw.Write(p)
	g.cut(err)
	return n, err
}

// FlushError flushes under the deadline of the last write; the proxy
// flushes through it (http.ResponseController).
func (g *stallGuarded) FlushError() error {
	g.start()
	err := g.sw.Flush()
	g.cut(err)
	return err
}

// Stop clears the deadline, if it was armed.
func (g *stallGuarded) Stop() {
	if g.started {
		g.sw.Stop()
	}
}

// cut counts, once, a response the deadline cut.
func (g *stallGuarded) cut(err error) {
	if g.stalled || !stallwrite.Stalled(err) {
		return
	}
	g.stalled = true
	g.h.refused.WithLabelValues(refusedClientStalled).Inc()
}

// Unwrap gives http.ResponseController the client's ResponseWriter.
func (g *stallGuarded) Unwrap() http.ResponseWriter { return g.ResponseWriter }
