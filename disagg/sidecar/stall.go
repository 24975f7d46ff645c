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
// client_stalled. The deadline is armed on w's connection at once; the
// caller clears it with Stop when the response ends, so that the next
// request on a keep-alive connection starts without it.
func (h *Handler) stallGuard(w http.ResponseWriter) *stallGuarded {
	return &stallGuarded{ResponseWriter: w, sw: stallwrite.Start(w, h.x.cfg.ResponseWriteTimeout), h: h}
}

// stallGuarded is a ResponseWriter whose writes wait at most
// Config.ResponseWriteTimeout each for the client.
type stallGuarded struct {
	http.ResponseWriter
	sw      stallwrite.Writer
	h       *Handler
	stalled bool
}

// Write writes p under the deadline, counting the first write the
// deadline cut.
func (g *stallGuarded) Write(p []byte) (int, error) {
	n, err := g.sw.Write(p)
	g.cut(err)
	return n, err
}

// FlushError flushes under the deadline of the last write; the proxy
// flushes through it (http.ResponseController).
func (g *stallGuarded) FlushError() error {
	err := g.sw.Flush()
	g.cut(err)
	return err
}

// Stop clears the deadline.
func (g *stallGuarded) Stop() { g.sw.Stop() }

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
