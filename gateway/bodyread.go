package gateway

import (
	"errors"
	"net/http"

	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/internal/jsonscan"
	"github.com/kvroute/kvroute/render"
)

// DefaultMaxBodyBytesInFlight is the default of Config.MaxBodyBytesInFlight:
// 512 MiB of request bodies held at once, sixteen bodies at
// DefaultMaxBodyBytes or thousands of ordinary prompts (a long-context prompt
// is a few hundred KiB of JSON).
const DefaultMaxBodyBytesInFlight = bytebudget.DefaultBodyBytesInFlight

// errBodyBudget is returned by readBody when the gateway-wide budget of
// Config.MaxBodyBytesInFlight has no room for the body's next buffer.
var errBodyBudget = errors.New("gateway: the gateway's budget of request body bytes in flight is exhausted")

// readBody reads r's body with bytebudget's ReadRequest: up to
// h.cfg.MaxBodyBytes (a larger body is an *http.MaxBytesError), under a
// read deadline of Config.BodyReadTimeout (a late body fails with an error
// matching os.ErrDeadlineExceeded), into buffers charged to h.budget that
// grow by doubling as bytes arrive, never sized from the announced
// Content-Length beyond 64 KiB. held is what the body holds of the budget
// (also on error), which the caller releases once it is done with the body.
// errBodyBudget means the budget had no room.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) (body []byte, held int64, err error) {
	body, held, err = h.budget.ReadRequest(w, r, h.cfg.MaxBodyBytes, h.cfg.BodyReadTimeout)
	if errors.Is(err, bytebudget.ErrNoRoom) {
		err = errBodyBudget
	}
	return body, held, err
}

// jsonBody returns body as vLLM reads it (jsonscan.PythonJSON): FastAPI
// hands the body's bytes to Python's json.loads, which decodes a UTF-16 or
// UTF-32 body and reads a UTF-8 one past a leading byte order mark. A wide
// body becomes the UTF-8 JSON the engine reads the same, in a copy charged
// to the body budget before it is made (held, which the caller releases
// once it is done with the body); a UTF-8 one loses its mark. ok false
// means the request was answered and counted: 400 for a wide body that is
// not text in its encoding (the message names it), 503 for no room in the
// budget.
func (h *Handler) jsonBody(w http.ResponseWriter, api render.API, am *apiMetrics, body []byte) (out []byte, held int64, ok bool) {
	out, err := jsonscan.PythonJSON(body, func(n int) error {
		if !h.budget.Acquire(int64(n)) {
			return errBodyBudget
		}
		held = int64(n)
		return nil
	})
	switch {
	case errors.Is(err, errBodyBudget):
		h.refuseBodyBudget(w, api, am)
		return nil, 0, false
	case err != nil:
		am.results[ResultBadRequest].Inc()
		writeError(w, api, http.StatusBadRequest, "the request body is not a JSON object: "+err.Error())
		return nil, 0, false
	}
	return out, held, true
}
