package gateway

import (
	"net/http"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/render"
)

// countTokensPath is vLLM's Anthropic token count (POST
// /v1/messages/count_tokens, Anthropic's messages.countTokens, which
// Anthropic clients, Claude Code among them, may call before a request): the
// engine renders the Messages body and answers its input_tokens without
// running the model, so it computes no KV cache and there is nothing to
// route it by.
const countTokensPath = "/v1/messages/count_tokens"

// apiCountTokens labels countTokensPath's requests in the gateway's metrics.
const apiCountTokens render.API = "count_tokens"

// serveCountTokens passes a token count to the endpoints serving its model in
// turn, without a routing decision or load accounting, its body bounded and
// budgeted as an inference body is and its model resolved as in multi-model
// mode; errors are in Anthropic's shape.
func (h *Handler) serveCountTokens(w http.ResponseWriter, r *http.Request) {
	am := h.met.byAPI[apiCountTokens]
	if r.Method != http.MethodPost {
		am.results[ResultBadRequest].Inc()
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, render.APIMessages, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed; use POST")
		return
	}
	if r.URL.Path != countTokensPath {
		r = withPath(r, countTokensPath) // vLLM would redirect the slashed path past the gateway
	}
	body, held, err := h.readBody(w, r)
	defer h.budget.Release(held)
	if err != nil {
		am.results[h.refuseBody(w, r, render.APIMessages, err)].Inc()
		return
	}
	body, wheld, ok := h.jsonBody(w, render.APIMessages, am, body) // as vLLM reads it, and as an inference body is
	defer h.budget.Release(wheld)
	if !ok {
		return
	}
	model, err := bodyModel(body)
	if err != nil {
		am.results[ResultBadRequest].Inc()
		writeError(w, render.APIMessages, http.StatusBadRequest, "the request body is not a JSON object: "+err.Error())
		return
	}
	eps := *h.endpoints.Load()
	var rw rewrite
	if h.served != nil {
		req := kvroute.Request{Body: body}
		var rheld int64
		var ok bool
		body, rheld, rw, ok = h.routeModel(w, render.APIMessages, am, &req, body, model, eps)
		defer h.budget.Release(rheld)
		if !ok {
			return
		}
		eps = servingModel(eps, req.Model, h.cfg.Model)
	}
	if len(eps) == 0 {
		am.results[ResultNoEndpoint].Inc()
		writeError(w, render.APIMessages, http.StatusServiceUnavailable, "the gateway has no endpoints")
		return
	}
	h.countRewrite(rw) // sent as the target from here on
	ep := eps[(h.models.Add(1)-1)%uint64(len(eps))]
	res, _ := h.forward(w, r, body, &kvroute.Decision{Endpoint: ep}, h.now(), am, nil, nil)
	am.results[res].Inc()
	if res == ResultUpstreamBroken || res == ResultClientStalled {
		panic(http.ErrAbortHandler) // the header is out: the client must not take a cut body as whole
	}
}

// servingModel returns the endpoints of eps that serve model (base: the
// model of endpoints that list none), as models.Serves decides for the
// whole list.
func servingModel(eps []kvroute.Endpoint, model, base string) []kvroute.Endpoint {
	var out []kvroute.Endpoint
	for i := range eps {
		if models.Serves(eps[i:i+1], model, base) {
			out = append(out, eps[i])
		}
	}
	return out
}
