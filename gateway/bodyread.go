package gateway

import (
	"errors"
	"net/http"

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
