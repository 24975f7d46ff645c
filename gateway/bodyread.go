package gateway

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/kvroute/kvroute/internal/bytebudget"
)

// DefaultMaxBodyBytesInFlight is the default of Config.MaxBodyBytesInFlight:
// 512 MiB of request bodies held at once, sixteen bodies at
// DefaultMaxBodyBytes or thousands of ordinary prompts (a long-context prompt
// is a few hundred KiB of JSON).
const DefaultMaxBodyBytesInFlight = bytebudget.DefaultBodyBytesInFlight

// errBodyBudget is returned by readBody when the gateway-wide budget of
// Config.MaxBodyBytesInFlight has no room for the body's next buffer.
var errBodyBudget = errors.New("gateway: the gateway's budget of request body bytes in flight is exhausted")

// readBodyTimed is readBody under a read deadline of Config.BodyReadTimeout
// on the client's connection. A body read then fails with an error matching
// os.ErrDeadlineExceeded. The deadline is cleared after a complete body, so
// that it does not cut the response: while the handler runs, net/http reads
// the connection to notice a client going away, and a timeout there would
// cancel the request. After a failed read it stays, bounding the rest of
// the body net/http discards after the handler. A ResponseWriter without
// read deadlines (not net/http's server) reads without one.
func (h *Handler) readBodyTimed(w http.ResponseWriter, r *http.Request) (body []byte, held int64, err error) {
	rc := http.NewResponseController(w)
	// A socket deadline, handed to the OS: wall time, not the handler's clock.
	if rc.SetReadDeadline(time.Now().Add(h.cfg.BodyReadTimeout)) != nil {
		return h.readBody(w, r)
	}
	body, held, err = h.readBody(w, r)
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return body, held, err
}

// readBody reads r's body up to h.cfg.MaxBodyBytes (a larger body is an
// *http.MaxBytesError) with bytebudget's ReadAll: into a buffer that grows
// by doubling as bytes arrive, never sized from the announced
// Content-Length beyond 64 KiB (so a client that announces 32 MiB and sends
// a few bytes gets no more), 8 KiB first when none is announced. Every
// buffer is charged to h.budget first; held is what the body holds of the
// budget when readBody returns (also on error), which the caller releases
// once it is done with the body. errBodyBudget means the budget had no room.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) (body []byte, held int64, err error) {
	limit := h.cfg.MaxBodyBytes
	rd := http.MaxBytesReader(w, r.Body, limit)
	cl := r.ContentLength
	if cl > limit {
		// Refused whatever it holds: read to the limit without keeping a
		// byte, so that the client is answered 413 as net/http does for an
		// oversized body (the connection closes after the answer).
		_, err := io.Copy(io.Discard, rd)
		if err == nil {
			err = &http.MaxBytesError{Limit: limit} // the body ended short of its Content-Length
		}
		return nil, 0, err
	}
	body, held, err = h.budget.ReadAll(rd, cl, limit)
	switch {
	case errors.Is(err, bytebudget.ErrNoRoom):
		err = errBodyBudget
	case errors.Is(err, bytebudget.ErrTooLong):
		err = &http.MaxBytesError{Limit: limit} // more than Content-Length: net/http prevents it
	}
	return body, held, err
}
