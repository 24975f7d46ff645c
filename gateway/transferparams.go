package gateway

import (
	"net/http"

	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/render"
)

// dropTransferParams returns body without its top-level kv_transfer_params
// (Config.AllowClientKVTransferParams), the copy charged to the body budget
// (what it holds is returned, for the caller to release once the response
// has ended), and false when it has answered the request itself: a copy
// that finds no room is answered 503, as a body is.
func (h *Handler) dropTransferParams(w http.ResponseWriter, api render.API, am *apiMetrics, body []byte) ([]byte, int64, bool) {
	out, err := sidecar.LocalBody(body)
	if err != nil { // scanBody read it as one object: not reached
		am.results[ResultBadRequest].Inc()
		writeError(w, api, http.StatusBadRequest, "the request body is not a JSON object: "+err.Error())
		return nil, 0, false
	}
	held := int64(cap(out))
	if !h.budget.Acquire(held) {
		h.refuseBodyBudget(w, api, am)
		return nil, 0, false
	}
	h.met.transferRemoved.Inc()
	return out, held, true
}
