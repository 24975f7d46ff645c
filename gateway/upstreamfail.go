package gateway

import (
	"net/http"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/upstreamfail"
	"github.com/kvroute/kvroute/render"
)

// upstreamResults is the result of each kind of failed request to an
// engine.
var upstreamResults = [...]Result{
	upstreamfail.Other:       ResultUpstreamError,
	upstreamfail.Unreachable: ResultUpstreamUnreachable,
	upstreamfail.Timeout:     ResultUpstreamTimeout,
	upstreamfail.Closed:      ResultUpstreamClosed,
}

// upstreamFailed answers r's client with 502 after the request to d's
// endpoint failed with err, of kind k, before any response header. The
// error names the engine's address and the operating system's error,
// which the client is not to see: the client gets the kind's fixed text,
// and the endpoint's ID in HeaderEndpoint as a response of the endpoint
// carries it; the whole error goes to the log with the request's context.
// It returns the result to count.
func (h *Handler) upstreamFailed(w http.ResponseWriter, r *http.Request, api render.API, d *kvroute.Decision, k upstreamfail.Kind, err error) Result {
	h.log.WarnContext(r.Context(), "upstream request failed", "endpoint", d.Endpoint.ID, "kind", k.String(),
		"path", r.URL.Path, "request_id", r.Header.Get(headerRequestID), "err", err)
	w.Header()[HeaderEndpoint] = []string{d.Endpoint.ID}
	writeError(w, api, http.StatusBadGateway, "the endpoint "+k.Text())
	return upstreamResults[k]
}
