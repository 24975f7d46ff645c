package extproc

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/internal/tokenin"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/tokenload"
)

// modelsPath is vLLM's model listing, passed through round robin.
const modelsPath = "/v1/models"

// apiGenerate is the API of a request to vLLM's token-in route
// (tokenin.Path), as the kvroute gateway names it.
const apiGenerate render.API = "generate"

// route chooses the endpoint once the request is complete and answers the
// request headers (and the body, when there is one). It runs at most once
// per stream: handle refuses every request message after the end of stream.
func (st *streamState) route(body []byte) error {
	if st.picked {
		return errors.New("extproc: internal error: a second pick on one stream")
	}
	st.picked = true
	st.startSpan()
	s := st.srv
	eps, selected := st.candidates()
	if len(eps) == 0 {
		msg := "the endpoint picker has no ready endpoint"
		switch {
		case selected:
			msg = "no endpoint named in the " + ConformanceSelectionHeader + " header is eligible"
		case st.hasHint && st.badHint != "":
			msg = "no endpoint of the subset hint is eligible: the subset hint is malformed (" + st.badHint + ")"
		case st.hasHint:
			msg = "no endpoint of the subset hint is eligible"
		}
		return st.noEndpoint(msg)
	}
	path := decodedPath(st.path)
	api, inference := render.APIForPath(path)
	trimmed := strings.TrimRight(path, "/")
	generate := !inference && trimmed == tokenin.Path
	if generate {
		api, inference = apiGenerate, true
	}
	if (inference || trimmed == modelsPath) && trimmed != st.path {
		// The engine gets the API's (or the model listing's) own path: vLLM
		// answers one with a trailing slash by a redirect to its own
		// address (the Host Envoy sends), which the client would follow
		// past the gateway; an escaped one gets its plain form.
		st.rewrite = trimmed + st.query
	}
	if body == nil || !inference {
		// Not an inference request (GET /v1/models, health probes through the
		// gateway): no prompt to route by, so spread it round robin.
		// The endpoints after it in the rotation are its fallbacks.
		first := int(s.met.passthroughSeq.Add(1)-1) % len(eps)
		list := make([]string, 0, min(1+s.cfg.Fallbacks, len(eps)))
		for k := 0; k < cap(list); k++ {
			list = append(list, eps[(first+k)%len(eps)].ID)
		}
		st.setResult(resultPassthrough)
		return st.answerRequest(list, "", body, false)
	}
	// Read as vLLM reads the body (Python's json.loads on its bytes): a
	// leading UTF-8 byte order mark is read past, a UTF-16 or UTF-32 body
	// decoded; the engine gets the UTF-8 JSON read.
	body, err := st.jsonBody(body)
	if err != nil {
		return err
	}
	model, transfer, err := requestMembers(body)
	st.model = model
	if err != nil {
		st.setResult(resultBadRequest)
		return st.immediate(http.StatusBadRequest, "the request body is not a JSON object: "+err.Error())
	}
	if transfer && !s.cfg.AllowClientKVTransferParams {
		if body, err = st.dropTransferParams(body); err != nil {
			return err
		}
	}
	req := &st.req
	*req = kvroute.Request{ID: st.header.Get("X-Request-Id"), API: api, Body: body, Header: st.header, Fallbacks: s.cfg.Fallbacks}
	if generate {
		// Token in: routed by its own token IDs, features and cache salt
		// (by load when its content_parts give raw media),
		// with nothing to render, as the kvroute gateway routes it.
		p, salt, err := tokenin.Prompt(body)
		if err != nil {
			st.setResult(resultBadRequest)
			return st.immediate(http.StatusBadRequest, "the body is not a token-in generate request: "+err.Error())
		}
		req.Prompts, req.CacheSalt = []render.Prompt{p}, salt
	}
	switch {
	case s.cfg.Model == "":
		req.Model = model
	case model != "" && model != s.cfg.Model:
		req.LoRA = model
	}
	ctx := st.pickContext()
	if s.admission != nil {
		if ctx, err = admission.FromHeader(ctx, st.header, s.clock.Now()); err != nil {
			st.setResult(resultBadRequest)
			return st.immediate(http.StatusBadRequest, err.Error())
		}
	}
	start := time.Now()
	d, err := s.picker.Pick(ctx, req, eps)
	s.met.pick.Observe(time.Since(start).Seconds())
	if err != nil {
		if st.stream.Context().Err() != nil {
			st.setResult(resultClientAbort)
			return errStop
		}
		if code, ok := admission.HTTPStatus(err); ok && s.admission != nil {
			res := resultNoEndpoint
			if code == http.StatusTooManyRequests {
				res = resultShed
			}
			st.setResult(res)
			return st.immediate(code, err.Error(), admissionHeaders(err, s.admission.Config().RetryAfter)...)
		}
		switch {
		case errors.Is(err, tokenload.ErrDuplicateRequestID):
			st.setResult(resultBadRequest)
			return st.immediate(http.StatusConflict, "a request with this x-request-id is already in flight")
		case errors.Is(err, tokenload.ErrInvalidRequestID):
			// An x-request-id the router's request table cannot file
			// (over tokenload.MaxRequestIDBytes): the client's mistake.
			st.setResult(resultBadRequest)
			return st.immediate(http.StatusBadRequest, "x-request-id: "+err.Error())
		case errors.Is(err, kvroute.ErrModelMismatch):
			// A model no endpoint serves: vLLM's answer (and the
			// gateway's), 404 NotFoundError.
			st.setResult(resultBadRequest)
			return st.immediate(http.StatusNotFound, err.Error())
		case errors.Is(err, kvroute.ErrNoAPI), errors.Is(err, session.ErrInvalidKey):
			// ErrInvalidKey: a malformed session header or cookie under
			// the session configuration's strict.
			st.setResult(resultBadRequest)
			return st.immediate(http.StatusBadRequest, err.Error())
		}
		return st.noEndpoint("no endpoint available: " + err.Error())
	}
	st.decision = d
	s.notify(d.Endpoint.ID)
	if s.admission != nil {
		// The dispatch gate: a sheddable request waits here, not in the
		// picked engine's queue, until that engine has headroom.
		if err := s.admission.Hold(ctx, d.Endpoint); err != nil {
			st.done = true
			d.Done(kvroute.DoneInfo{Err: err})
			s.notify(d.Endpoint.ID)
			if st.stream.Context().Err() != nil {
				st.setResult(resultClientAbort)
				return errStop
			}
			code, ok := admission.HTTPStatus(err)
			if !ok {
				return st.noEndpoint("no endpoint available: " + err.Error())
			}
			res := resultNoEndpoint
			if code == http.StatusTooManyRequests {
				res = resultShed
			}
			st.setResult(res)
			return st.immediate(code, err.Error(), admissionHeaders(err, s.admission.Config().RetryAfter)...)
		}
	}
	if d.RenderErr != nil {
		s.met.renderFallbacks.Inc()
	}
	st.setResult(resultRouted)
	list := append(st.listBuf[:0], d.Endpoint.ID)
	for _, f := range d.Fallbacks {
		list = append(list, f.Endpoint.ID)
	}
	prefill := ""
	if len(d.Roles) > 0 {
		// A split request: its decode endpoint's sidecar prefills where
		// the prefill endpoint's requests go, which its ID need not be.
		prefill = disagg.PrefillerHostPort(d.Roles[0].Endpoint)
	}
	return st.answerRequest(list, prefill, body, d.RenderErr != nil)
}

// decodedPath is path as vLLM's server matches its routes, percent-decoded:
// "/v1/%63ompletions" is its completions route, and is routed as such (a
// path with an escape it cannot decode is kept, and matches none).
func decodedPath(path string) string {
	if strings.IndexByte(path, '%') >= 0 {
		if p, err := url.PathUnescape(path); err == nil {
			return p
		}
	}
	return path
}

// candidates returns the endpoints the request may go to: all of them, or
// those the subset hint names, narrowed, with the conformance test hooks on,
// to those the selection header names (in its order; selected is true when
// it named any).
func (st *streamState) candidates() (eps []kvroute.Endpoint, selected bool) {
	eps = *st.srv.endpoints.Load()
	if st.hasHint {
		eps = subsetCandidates(st.subset, eps)
	}
	if st.srv.cfg.ConformanceTestHooks {
		if sel, ok := conformanceSelection(st.header.Values(ConformanceSelectionHeader), eps); ok {
			return sel, true
		}
	}
	return eps, false
}
