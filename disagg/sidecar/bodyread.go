package sidecar

import (
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/kvroute/kvroute/internal/bytebudget"
)

// readBody reads r's body whole with bytebudget's ReadRequest: within
// Config.MaxBodyBytes, under a read deadline of Config.BodyReadTimeout on
// the client's connection, into buffers charged to the Handler's budget of
// Config.MaxBodyBytesInFlight. held is what the body holds of the budget,
// also on error; the caller releases it once done with the body.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) (body []byte, held int64, err error) {
	return h.budget.ReadRequest(w, r, h.x.cfg.MaxBodyBytes, h.x.cfg.BodyReadTimeout)
}

// refuseBody answers a request whose body readBody refused, and counts it.
func (h *Handler) refuseBody(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || errors.Is(err, bytebudget.ErrTooLong):
		h.refused.WithLabelValues(refusedTooLarge).Inc()
		writeError(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", h.x.cfg.MaxBodyBytes))
	case errors.Is(err, bytebudget.ErrNoRoom):
		// The unread rest of the body stays on the connection: close it.
		w.Header().Set("Connection", "close")
		h.refuseBudget(w, r)
	case errors.Is(err, os.ErrDeadlineExceeded):
		// Checked before the context: net/http cancels it on the
		// connection's read error.
		h.refused.WithLabelValues(refusedBodyTimeout).Inc()
		w.Header().Set("Connection", "close")
		writeError(w, r, http.StatusRequestTimeout, fmt.Sprintf(
			"the request body did not arrive within the sidecar's body read timeout of %v", h.x.cfg.BodyReadTimeout))
	case r.Context().Err() != nil:
		h.refused.WithLabelValues(refusedClientGone).Inc()
	default:
		h.refused.WithLabelValues(refusedBadBody).Inc()
		writeError(w, r, http.StatusBadRequest, "reading the request body: "+err.Error())
	}
}

// refuseBudget answers 503 a request whose body found no room in the
// Handler's budget of Config.MaxBodyBytesInFlight, and counts it.
func (h *Handler) refuseBudget(w http.ResponseWriter, r *http.Request) {
	h.refused.WithLabelValues(refusedBodyBudget).Inc()
	w.Header().Set("Retry-After", "1")
	writeError(w, r, http.StatusServiceUnavailable, fmt.Sprintf(
		"the sidecar is holding its limit of %d bytes of request bodies in flight; retry later", h.x.cfg.MaxBodyBytesInFlight))
}
