package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/render"
)

// serveInference serves one inference request of api, in steps: it reads
// the body, makes the Router's request of it and resolves its model,
// picks an endpoint, passes the dispatch gate, forwards the request and,
// on every path past the pick, releases the Decision. What the body's
// copies hold of the body budget is released after the response.
func (h *Handler) serveInference(w http.ResponseWriter, r *http.Request, api render.API) {
	start := h.now()
	am := h.met.byAPI[api]
	var held heldBodies
	defer held.release(&h.budget) // after the response: forward holds the body until then
	body, model, ok := h.readInference(w, r, api, am, &held)
	if !ok {
		return
	}
	// In flight from its whole, valid body on (its render and pick give
	// the warmer its lead): a request still sending its body, or refused
	// for it, can reach no engine and does not make them warmed ahead.
	n := h.inflight.Add(1)
	defer h.inflight.Add(-1)
	if h.ownsTr != nil {
		h.ownsTr.RaisePeak(n)
	}
	eps := *h.endpoints.Load()
	req, ok := h.inferenceRequest(w, r, api, am, body, eps)
	if !ok {
		return
	}
	body, rw, ok := h.resolveModel(w, api, am, req, body, model, eps, &held)
	if !ok {
		return
	}
	r, end := h.startSpan(r)
	defer end()
	ctx, d, ok := h.pick(w, r, api, am, req, eps, start)
	if !ok {
		return
	}
	var (
		res  Result
		ferr error
	)
	// The request ends once: on success with the engine's cached tokens
	// (finish, in forward), or here, whatever forward did. The admission
	// hears of each change of the endpoint's accounting: the pick, the first
	// chunk (in forward) and the end. Then the Decision goes back to the
	// Router for a later pick, once, on every path (a broken stream's
	// panic included): nothing reads it after this deferred call, and the
	// response copy in forward, the only other user, has returned.
	h.notify(d)
	defer func() {
		d.Done(kvroute.DoneInfo{Err: ferr})
		h.notify(d)
		h.release(d)
	}()
	if ferr = h.dispatch(ctx, w, r, api, am, d); ferr != nil {
		return
	}
	h.countRewrite(rw) // sent as the target from here on: picked and past the dispatch gate
	rec := h.decisionRecord(r, api, req, model, d, start)
	fwd, fheld, pooled := h.forwardBody(body, d)
	defer h.budget.Release(fheld)
	defer recycleTokenBody(pooled) // forward has returned: its transport is done with fwd
	res, ferr = h.forward(w, r, fwd, d, start, am, &rec, req)
	h.keepRecord(am, res, &rec)
	if res == ResultUpstreamBroken || res == ResultClientStalled {
		// The header is out: abort the connection so that the client does not
		// mistake the truncated body for a complete one.
		panic(http.ErrAbortHandler)
	}
}

// heldBodies is what a request's copies of its body hold of the body
// budget (Config.MaxBodyBytesInFlight): the body read, its UTF-8 JSON,
// the copy without kv_transfer_params and the model rewrite's.
type heldBodies struct {
	n    [4]int64
	held int
}

// add records n bytes more held.
func (b *heldBodies) add(n int64) {
	b.n[b.held] = n
	b.held++
}

// release gives what b holds back to budget, last taken first.
func (b *heldBodies) release(budget *bytebudget.Budget) {
	for i := b.held - 1; i >= 0; i-- {
		budget.Release(b.n[i])
	}
}

// readInference reads r's body as the engine will read it and returns it
// with the model it names, adding what its copies hold to held; false when
// it has answered the request itself.
func (h *Handler) readInference(w http.ResponseWriter, r *http.Request, api render.API, am *apiMetrics, held *heldBodies) (body []byte, model string, ok bool) {
	body, n, err := h.readBody(w, r)
	held.add(n)
	if err != nil {
		am.results[h.refuseBody(w, r, api, err)].Inc()
		return nil, "", false
	}
	// Read as vLLM reads the body (Python's json.loads on its bytes): a
	// leading UTF-8 byte order mark is read past, a UTF-16 or UTF-32 body
	// decoded; the engine gets the UTF-8 JSON read.
	body, n, ok = h.jsonBody(w, api, am, body)
	held.add(n)
	if !ok {
		return nil, "", false
	}
	model, transfer, err := scanBody(body)
	if err != nil {
		am.results[ResultBadRequest].Inc()
		writeError(w, api, http.StatusBadRequest, "the request body is not a JSON object: "+err.Error())
		return nil, "", false
	}
	if transfer && !h.cfg.AllowClientKVTransferParams {
		body, n, ok = h.dropTransferParams(w, api, am, body)
		held.add(n)
		if !ok {
			return nil, "", false
		}
	}
	return body, model, true
}

// inferenceRequest makes the Router's request of body, to be picked among
// eps; false when it has answered the request itself (no endpoints, or a
// generate body that is no token-in request).
func (h *Handler) inferenceRequest(w http.ResponseWriter, r *http.Request, api render.API, am *apiMetrics, body []byte, eps []kvroute.Endpoint) (*kvroute.Request, bool) {
	if len(eps) == 0 {
		am.results[ResultNoEndpoint].Inc()
		writeError(w, api, http.StatusServiceUnavailable, "the gateway has no endpoints")
		return nil, false
	}
	req := &kvroute.Request{ID: r.Header.Get(headerRequestID), API: api, Body: body, Header: r.Header, KeepPrompts: h.tokenIn[api]}
	if api == apiGenerate {
		p, salt, err := generatePrompt(body)
		if err != nil {
			am.results[ResultBadRequest].Inc()
			writeError(w, api, http.StatusBadRequest, "the body is not a token-in generate request: "+err.Error())
			return nil, false
		}
		req.Prompts, req.CacheSalt = []render.Prompt{p}, salt
	}
	return req, true
}

// resolveModel sets req's model or adapter from the body's model and
// returns the body to forward and the model rewrite, counted once the
// request is sent (multi-model mode: routeModel, whose copy it adds to
// held); false when it has answered the request itself.
func (h *Handler) resolveModel(w http.ResponseWriter, api render.API, am *apiMetrics, req *kvroute.Request, body []byte, model string, eps []kvroute.Endpoint, held *heldBodies) ([]byte, rewrite, bool) {
	var rw rewrite
	switch {
	case h.served != nil:
		var (
			n      int64
			routed bool
		)
		body, n, rw, routed = h.routeModel(w, api, am, req, body, model, eps)
		held.add(n)
		if !routed {
			return nil, rewrite{}, false
		}
	case h.cfg.Model == "":
		req.Model = model
	case model != "" && model != h.cfg.Model:
		req.LoRA = model
	}
	return body, rw, true
}

// refuseBody answers, in api's shape, a request whose body could not be
// read (readBody's error err), and returns the result to count.
func (h *Handler) refuseBody(w http.ResponseWriter, r *http.Request, api render.API, err error) Result {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, api, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("request body exceeds the gateway's limit of %d bytes", tooLarge.Limit))
		return ResultBodyTooLarge
	case errors.Is(err, errBodyBudget):
		// The unread rest of the body stays on the connection: close it.
		w.Header().Set("Connection", "close")
		h.writeBodyBudget(w, api)
		return ResultBodyBudget
	case errors.Is(err, os.ErrDeadlineExceeded):
		// Checked before the context: net/http cancels it on the
		// connection's read error.
		w.Header().Set("Connection", "close")
		writeError(w, api, http.StatusRequestTimeout, fmt.Sprintf(
			"the request body did not arrive within the gateway's body read timeout of %v", h.cfg.BodyReadTimeout))
		return ResultBodyTimeout
	case r.Context().Err() != nil:
		return ResultClientAbort
	default:
		writeError(w, api, http.StatusBadRequest, "reading the request body: "+err.Error())
		return ResultBadRequest
	}
}

// refuseBodyBudget answers a request whose body (or a copy the gateway
// makes of it) found no room in Config.MaxBodyBytesInFlight.
func (h *Handler) refuseBodyBudget(w http.ResponseWriter, api render.API, am *apiMetrics) {
	am.results[ResultBodyBudget].Inc()
	h.writeBodyBudget(w, api)
}

// writeBodyBudget writes refuseBodyBudget's answer.
func (h *Handler) writeBodyBudget(w http.ResponseWriter, api render.API) {
	w.Header().Set("Retry-After", "1")
	writeError(w, api, http.StatusServiceUnavailable, fmt.Sprintf(
		"the gateway is holding its limit of %d bytes of request bodies in flight; retry later", h.cfg.MaxBodyBytesInFlight))
}
