package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/tokenload"
)

// pick picks req's endpoint among eps and returns the Decision with the
// request's context (its admission priority and deadline read from the
// header when an admission stage runs); false when it has answered the
// request itself, or the client has gone.
func (h *Handler) pick(w http.ResponseWriter, r *http.Request, api render.API, am *apiMetrics, req *kvroute.Request, eps []kvroute.Endpoint, start time.Time) (context.Context, *kvroute.Decision, bool) {
	ctx := r.Context()
	if h.admission != nil {
		var err error
		if ctx, err = admission.FromHeader(ctx, r.Header, start); err != nil {
			am.results[ResultBadRequest].Inc()
			writeError(w, api, http.StatusBadRequest, err.Error())
			return nil, nil, false
		}
	}
	// The pick's own time: the body's upload, read above, is the client's.
	picked := h.now()
	d, err := h.picker.Pick(ctx, req, eps)
	am.pick.Observe(h.now().Sub(picked).Seconds())
	if err != nil {
		h.pickFailed(w, r, api, am, err)
		return nil, nil, false
	}
	return ctx, d, true
}

// pickFailed answers, in api's shape, a request whose pick failed with
// err, and counts its result.
func (h *Handler) pickFailed(w http.ResponseWriter, r *http.Request, api render.API, am *apiMetrics, err error) {
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
}

// dispatch passes the admission stage's dispatch gate, when one runs: a
// sheddable request waits here, not in the picked engine's queue, until
// that engine has headroom. An error is the gate's, the request answered
// (or its client gone) and its result counted.
func (h *Handler) dispatch(ctx context.Context, w http.ResponseWriter, r *http.Request, api render.API, am *apiMetrics, d *kvroute.Decision) error {
	if h.admission == nil {
		return nil
	}
	err := h.admission.Hold(ctx, d.Endpoint)
	if err == nil {
		return nil
	}
	if r.Context().Err() != nil {
		am.results[ResultClientAbort].Inc()
		return err
	}
	if !h.refuse(w, api, am, err) {
		am.results[ResultNoEndpoint].Inc()
		writeError(w, api, http.StatusServiceUnavailable, "no endpoint available: "+err.Error())
	}
	return err
}

// decisionRecord starts the status page's record of the request picked
// as d, giving the request an ID (sent to the engine too) when the client
// gave none.
func (h *Handler) decisionRecord(r *http.Request, api render.API, req *kvroute.Request, model string, d *kvroute.Decision, start time.Time) DecisionRecord {
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
	return rec
}

// keepRecord counts the forwarded request's result res and keeps its
// record on the status page, the client texts bounded.
func (h *Handler) keepRecord(am *apiMetrics, res Result, rec *DecisionRecord) {
	am.results[res].Inc()
	rec.Result = res
	kept := *rec // the status page's copy, its client texts bounded
	if clipRecord(&kept) {
		h.met.recordCut.Inc()
	}
	h.recent.Add(kept)
}
