package sidecar

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/kvroute/kvroute/internal/bytebudget"
)

// readBody reads r's body whole, within Config.MaxBodyBytes, under a read
// deadline of Config.BodyReadTimeout on the client's connection, into
// buffers charged to the Handler's budget of Config.MaxBodyBytesInFlight.
// held is what the body holds of the budget, also on error; the caller
// releases it once done with the body. The deadline is cleared after a
// complete body, so that it does not cut the response (net/http reads the
// connection while the handler runs, to notice a client going away); after
// a failed read it stays, bounding what net/http discards afterwards. A
// ResponseWriter without read deadlines (not net/http's server) reads
// without one.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) (body []byte, held int64, err error) {
	rc := http.NewResponseController(w)
	// A socket deadline, handed to the OS: wall time.
	timed := rc.SetReadDeadline(time.Now().Add(h.x.cfg.BodyReadTimeout)) == nil
	limit := h.x.cfg.MaxBodyBytes
	rd := http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength > limit {
		// Refused whatever it holds: read to the limit without keeping a
		// byte, so that the client is answered 413 as net/http answers an
		// oversized body.
		if _, err := io.Copy(io.Discard, rd); err != nil {
			return nil, 0, err
		}
		return nil, 0, &http.MaxBytesError{Limit: limit}
	}
	body, held, err = h.budget.ReadAll(rd, r.ContentLength, limit)
	if err == nil && timed {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return body, held, err
}

// refuseBody answers a request whose body readBody refused, and counts it.
func (h *Handler) refuseBody(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || errors.Is(err, bytebudget.ErrTooLong):
		h.refused.WithLabelValues(refusedTooLarge).Inc()
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", h.x.cfg.MaxBodyBytes))
	case errors.Is(err, bytebudget.ErrNoRoom):
		h.refused.WithLabelValues(refusedBodyBudget).Inc()
		// The unread rest of the body stays on the connection: close it.
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf(
			"the sidecar is holding its limit of %d bytes of request bodies in flight; retry later", h.x.cfg.MaxBodyBytesInFlight))
	case errors.Is(err, os.ErrDeadlineExceeded):
		// Checked before the context: net/http cancels it on the
		// connection's read error.
		h.refused.WithLabelValues(refusedBodyTimeout).Inc()
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestTimeout, fmt.Sprintf(
			"the request body did not arrive within the sidecar's body read timeout of %v", h.x.cfg.BodyReadTimeout))
	case r.Context().Err() != nil:
		h.refused.WithLabelValues(refusedClientGone).Inc()
	default:
		h.refused.WithLabelValues(refusedBadBody).Inc()
		writeError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
	}
}
