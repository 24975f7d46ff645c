package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/tokenload"
)

func (h *Handler) serveInference(w http.ResponseWriter, r *http.Request, api render.API) {
	start := h.now()
	n := h.inflight.Add(1)
	defer h.inflight.Add(-1)
	if h.ownsTr != nil {
		h.ownsTr.RaisePeak(n)
	}
	am := h.met.byAPI[api]
	body, held, err := h.readBody(w, r)
	defer h.budget.Release(held) // after the response: forward holds the body until then
	if err != nil {
		am.results[h.refuseBody(w, r, api, err)].Inc()
		return
	}
	// Read as vLLM reads the body (Python's json.loads on its bytes): a
	// leading UTF-8 byte order mark is read past, a UTF-16 or UTF-32 body
	// decoded; the engine gets the UTF-8 JSON read.
	body, wheld, ok := h.jsonBody(w, api, am, body)
	defer h.budget.Release(wheld) // after the response, as the body's
	if !ok {
		return
	}
	model, transfer, err := scanBody(body)
	if err != nil {
		am.results[ResultBadRequest].Inc()
		writeError(w, api, http.StatusBadRequest, "the request body is not a JSON object: "+err.Error())
		return
	}
	if transfer && !h.cfg.AllowClientKVTransferParams {
		var theld int64
		var ok bool
		body, theld, ok = h.dropTransferParams(w, api, am, body)
		defer h.budget.Release(theld) // after the response, as the body's
		if !ok {
			return
		}
	}
	eps := *h.endpoints.Load()
	if len(eps) == 0 {
		am.results[ResultNoEndpoint].Inc()
		writeError(w, api, http.StatusServiceUnavailable, "the gateway has no endpoints")
		return
	}
	req := &kvroute.Request{ID: r.Header.Get(headerRequestID), API: api, Body: body, Header: r.Header, KeepPrompts: h.tokenIn[api]}
	if api == apiGenerate {
		p, salt, err := generatePrompt(body)
		if err != nil {
			am.results[ResultBadRequest].Inc()
			writeError(w, api, http.StatusBadRequest, "the body is not a token-in generate request: "+err.Error())
			return
		}
		req.Prompts, req.CacheSalt = []render.Prompt{p}, salt
	}
	var rw rewrite // the model rewrite, counted once the request is sent
	switch {
	case h.served != nil:
		var (
			rheld  int64
			routed bool
		)
		body, rheld, rw, routed = h.routeModel(w, api, am, req, body, model, eps)
		defer h.budget.Release(rheld) // after the response, as the body's
		if !routed {
			return
		}
	case h.cfg.Model == "":
		req.Model = model
	case model != "" && model != h.cfg.Model:
		req.LoRA = model
	}
	r, end := h.startSpan(r)
	defer end()
	ctx := r.Context()
	if h.admission != nil {
		if ctx, err = admission.FromHeader(ctx, r.Header, start); err != nil {
			am.results[ResultBadRequest].Inc()
			writeError(w, api, http.StatusBadRequest, err.Error())
			return
		}
	}
	// The pick's own time: the body's upload, read above, is the client's.
	picked := h.now()
	d, err := h.picker.Pick(ctx, req, eps)
	am.pick.Observe(h.now().Sub(picked).Seconds())
	if err != nil {
		if r.Context().Err() != nil {
			am.results[ResultClientAbort].Inc()
			return
		}
		if h.refuse(w, api, am, err) {
			return
		}
		switch {
		case errors.Is(err, tokenload.ErrDuplicateRequestID):
			// The router accounts load by request ID: two requests in flight
			// with one X-Request-Id would release each other's load.
			am.results[ResultBadRequest].Inc()
			writeError(w, api, http.StatusConflict, "a request with this X-Request-Id is already in flight")
			return
		case errors.Is(err, tokenload.ErrInvalidRequestID):
			am.results[ResultBadRequest].Inc()
			writeError(w, api, http.StatusBadRequest, "X-Request-Id: "+err.Error())
			return
		case errors.Is(err, session.ErrInvalidKey):
			// Session.Strict: a malformed session header or cookie.
			am.results[ResultBadRequest].Inc()
			writeError(w, api, http.StatusBadRequest, err.Error())
			return
		case errors.Is(err, kvroute.ErrModelMismatch):
			// The body names a model no endpoint serves (or the router
			// does not index): vLLM's answer to a model it does not
			// serve, 404. The client should name a served model (or the
			// gateway map its alias, ServerConfig.Models).
			am.results[ResultBadRequest].Inc()
			writeParamError(w, api, http.StatusNotFound, err.Error(), "model")
			return
		}
		am.results[ResultNoEndpoint].Inc()
		writeError(w, api, http.StatusServiceUnavailable, "no endpoint available: "+err.Error())
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
	if h.admission != nil {
		// The dispatch gate: a sheddable request waits here, not in the
		// picked engine's queue, until that engine has headroom.
		if ferr = h.admission.Hold(ctx, d.Endpoint); ferr != nil {
			if r.Context().Err() != nil {
				am.results[ResultClientAbort].Inc()
				return
			}
			if !h.refuse(w, api, am, ferr) {
				am.results[ResultNoEndpoint].Inc()
				writeError(w, api, http.StatusServiceUnavailable, "no endpoint available: "+ferr.Error())
			}
			return
		}
	}
	h.countRewrite(rw) // sent as the target from here on: picked and past the dispatch gate
	rec := DecisionRecord{Time: start, RequestID: req.ID, API: api, Model: model, LoRA: req.LoRA != "",
		Endpoint: d.Endpoint.ID, PromptTokens: d.PromptTokens, PredictedCached: d.CachedTokens,
		Outcome: d.Outcome.String(), UsedCache: d.UsedCache, CacheMode: d.CacheMode.String(), ActualCached: -1}
	if rec.Model == "" {
		rec.Model = h.cfg.Model
	}
	if rec.RequestID == "" {
		// The engine gets the ID too (vLLM names the request by it), so its
		// logs and the status page agree; the router's request table
		// stays for the IDs clients give.
		rec.RequestID = h.ids.next()
		r.Header[headerRequestID] = []string{rec.RequestID}
	}
	fwd, fheld, pooled := h.forwardBody(body, d)
	defer h.budget.Release(fheld)
	defer recycleTokenBody(pooled) // forward has returned: its transport is done with fwd
	res, ferr = h.forward(w, r, fwd, d, start, am, &rec, req)
	am.results[res].Inc()
	rec.Result = res
	kept := rec // the status page's copy, its client texts bounded
	if clipRecord(&kept) {
		h.met.recordCut.Inc()
	}
	h.recent.Add(kept)
	if res == ResultUpstreamBroken || res == ResultClientStalled {
		// The header is out: abort the connection so that the client does not
		// mistake the truncated body for a complete one.
		panic(http.ErrAbortHandler)
	}
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
