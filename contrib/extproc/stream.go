package extproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/internal/jsonscan"
	"github.com/kvroute/kvroute/internal/tokenin"
	"github.com/kvroute/kvroute/internal/usage"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/tokenload"
)

// streamState is one ext_proc stream: one HTTP request and its response.
type streamState struct {
	srv    *Server
	stream extprocv3.ExternalProcessor_ProcessServer

	header   http.Header
	path     string
	query    string   // the :path's query, with its "?"; "" without one
	rewrite  string   // the :path the engine gets instead of the client's; "" keeps it
	subset   []string // the subset hint; nil when absent
	hasHint  bool
	body     []byte
	held     int64 // the bytes of Server.bodies the body's buffer holds
	headers  bool  // the request headers came
	ended    bool  // the request's end of stream came (headers, body or trailers)
	trailers bool  // the request trailers came
	picked   bool
	decision *kvroute.Decision // nil until picked, and for requests routed without one
	endpoint string            // the pick
	list     []string          // the pick and its fallbacks, as sent to Envoy
	served   string            // the endpoint Envoy reported as having served
	model    string            // the body's model
	result   string            // the stream's result, for the status page
	firstOut bool
	done     bool
	// respPlain: Envoy sends the response body in a mode other than
	// FULL_DUPLEX_STREAMED, as it said in the stream's first message
	// (protocol_config), and takes a streamed body mutation in none of them
	// (STREAMED refuses it; BUFFERED reads it as an empty body, refused
	// against the response's content-length): each chunk is answered
	// without one.
	respPlain bool
	// reqMode is the request body mode Envoy named in protocol_config;
	// knowsMode: it named one (an Envoy before protocol_config names none).
	reqMode   filterv3.ProcessingMode_BodySendMode
	knowsMode bool

	// The usage of a response read for its cached tokens
	// (Config.ObserveCachedTokens): scanning from a 2xx response's headers
	// until its end, what it found kept for the status page.
	scan     usage.Scanner
	scanning bool
	observed bool // the engine reported actual cached tokens
	actual   int

	req     kvroute.Request // the request picked, kept with the stream instead of allocated apart
	listBuf [1]string       // list's array when the pick has no fallbacks

	span trace.Span      // SpanRoute when the picker traces, from the pick to the stream's end (tracing.go)
	ctx  context.Context // the span's context, which the pick runs in; nil without a span
}

// modelsPath is vLLM's model listing, passed through round robin.
const modelsPath = "/v1/models"

// apiGenerate is the API of a request to vLLM's token-in route
// (tokenin.Path), as the kvroute gateway names it.
const apiGenerate render.API = "generate"

// errStop ends a stream after an immediate response was sent.
var errStop = errors.New("extproc: stream answered")

func (st *streamState) run() error {
	for {
		req, err := st.stream.Recv()
		if err != nil {
			if st.headers && !st.picked && st.result == "" {
				// A request began and its stream ended before the pick:
				// the client left, or Envoy reset the stream.
				st.setResult(resultClientAbort)
			}
			if err == io.EOF || status.Code(err) == codes.Canceled || st.stream.Context().Err() != nil {
				return nil
			}
			return err
		}
		if err := st.handle(req); err != nil {
			if errors.Is(err, errStop) {
				return nil
			}
			return err
		}
	}
}

// finish releases whatever the request still holds: a stream that ends
// before the response did (client gone, Envoy reset, upstream failure) must
// not leave load, nor its body's share of the body budget, behind. Decision.Done is idempotent, so this is the only
// release that counts when the response path already released it.
func (st *streamState) finish() {
	st.dropBody()
	if st.scanning {
		st.scanning = false
		st.scan.Release() // a response cut short gives its buffer back
	}
	if st.decision != nil && !st.done {
		st.done = true
		st.decision.Done(kvroute.DoneInfo{Err: errors.New("extproc: stream ended before the response")})
		st.srv.met.aborted.Inc()
		st.srv.notify(st.decision.Endpoint.ID)
	}
	if st.result != "" {
		st.record()
	}
	st.decision.Release() // ended above or on the response path; nil-safe
	st.decision = nil
}

// setResult counts the stream's result and keeps it for the status page.
func (st *streamState) setResult(r string) {
	st.result = r
	st.srv.met.result(r)
}

// record adds the stream to the status page's latest streams.
func (st *streamState) record() {
	rec := streamRecord{
		Time: st.srv.clock.Now(), Path: st.path, Model: st.model, Endpoints: strings.Join(st.list, ","),
		Served: st.served, Result: st.result,
	}
	if st.header != nil {
		rec.RequestID = st.header.Get("X-Request-Id")
	}
	if d := st.decision; d != nil {
		rec.PromptTokens, rec.PredictedCached, rec.UsedCache, rec.Outcome = d.PromptTokens, d.CachedTokens, d.UsedCache, d.Outcome.String()
		rec.CacheMode = d.CacheMode.String()
	}
	rec.ActualCached, rec.Observed = st.actual, st.observed
	if clipRecord(&rec) {
		st.srv.met.recordCut.Inc()
	}
	st.srv.recent.Add(rec)
}

func (st *streamState) handle(req *extprocv3.ProcessingRequest) error {
	if st.picked && st.held != 0 {
		switch req.Request.(type) {
		case *extprocv3.ProcessingRequest_ResponseHeaders, *extprocv3.ProcessingRequest_ResponseBody, *extprocv3.ProcessingRequest_ResponseTrailers:
			st.dropBody() // the upstream answered: Envoy took the body it was sent back
		}
	}
	if pc := req.GetProtocolConfig(); pc != nil {
		st.respPlain = pc.GetResponseBodyMode() != filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
		st.reqMode, st.knowsMode = pc.GetRequestBodyMode(), true
	}
	if md := req.GetMetadataContext(); md != nil && !st.hasHint {
		st.subset, st.hasHint = subsetHint(md, st.srv.cfg.SubsetNamespace, st.srv.cfg.SubsetKey)
	}
	switch v := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		if st.headers {
			what := "request headers came a second time"
			if st.ended {
				what = "request headers came after the request's end of stream"
			}
			return st.protocolError(protoRequestHeaders, what)
		}
		st.headers = true
		st.header, st.path, st.query = headersOf(v.RequestHeaders.GetHeaders())
		if v.RequestHeaders.GetEndOfStream() {
			st.ended = true
			return st.route(nil)
		}
		if st.knowsMode && st.reqMode != filterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
			return st.refuseBodyMode()
		}
	case *extprocv3.ProcessingRequest_RequestBody:
		if st.ended {
			return st.protocolError(protoRequestBody, "a request body came after the request's end of stream")
		}
		chunk := v.RequestBody.GetBody()
		if int64(len(st.body))+int64(len(chunk)) > st.srv.cfg.MaxBodyBytes {
			st.setResult(resultBodyTooLarge)
			return st.immediate(http.StatusRequestEntityTooLarge,
				fmt.Sprintf("request body exceeds the endpoint picker's limit of %d bytes", st.srv.cfg.MaxBodyBytes))
		}
		if !st.appendBody(chunk) {
			return st.refuseBodyBudget()
		}
		if v.RequestBody.GetEndOfStream() {
			st.ended = true
			if st.body == nil {
				// An empty body (headers without end of stream, then one
				// empty chunk ending it) is still a body Envoy waits for
				// the answer to: not the nil of a request without one.
				st.body = []byte{}
			}
			return st.route(st.body)
		}
	case *extprocv3.ProcessingRequest_RequestTrailers:
		// Trailers end a request whose body did not (the pick is made here);
		// after a body that ended the request they are only acknowledged.
		// Either way they come once.
		if st.trailers {
			return st.protocolError(protoRequestTrailers, "request trailers came after the request's end of stream")
		}
		st.trailers, st.ended = true, true
		if !st.picked {
			if err := st.route(st.body); err != nil {
				return err
			}
		}
		return st.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
			RequestTrailers: &extprocv3.TrailersResponse{}}})
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return st.responseHeaders(req, v.ResponseHeaders)
	case *extprocv3.ProcessingRequest_ResponseBody:
		return st.responseBody(v.ResponseBody)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		st.release()
		return st.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
			ResponseTrailers: &extprocv3.TrailersResponse{}}})
	}
	return nil
}

// protocolError ends a stream whose client sent a request-phase message out
// of order: counted by kind, answered with one gRPC InvalidArgument status.
// The stream's decision, if any, is released by finish as the stream ends;
// nothing is picked again.
func (st *streamState) protocolError(kind, what string) error {
	st.srv.met.protocolErrors[kind].Inc()
	return status.Error(codes.InvalidArgument, "extproc: protocol error: "+what)
}

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
		st.setResult(resultNoEndpoint)
		msg := "the endpoint picker has no ready endpoint"
		switch {
		case selected:
			msg = "no endpoint named in the " + ConformanceSelectionHeader + " header is eligible"
		case st.hasHint:
			msg = "no endpoint of the subset hint is eligible"
		}
		return st.immediate(http.StatusServiceUnavailable, msg)
	}
	path := st.path
	if strings.IndexByte(path, '%') >= 0 {
		// vLLM's server matches its routes on the percent-decoded path:
		// "/v1/%63ompletions" is its completions route, and is routed as
		// such (a path with an escape it cannot decode matches none).
		if p, err := url.PathUnescape(path); err == nil {
			path = p
		}
	}
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
		st.setResult(resultNoEndpoint)
		return st.immediate(http.StatusServiceUnavailable, "no endpoint available: "+err.Error())
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
				st.setResult(resultNoEndpoint)
				return st.immediate(http.StatusServiceUnavailable, "no endpoint available: "+err.Error())
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
		prefill = d.Roles[0].Endpoint.ID // a split request: its decode endpoint's sidecar prefills there
	}
	return st.answerRequest(list, prefill, body, d.RenderErr != nil)
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

// sidecarHeaders are the request headers llm-d's routing sidecar acts on
// besides disagg.HeaderPrefiller, which the picker never sets: the encoder
// endpoints, the endpoint to pull the prompt's KV blocks from, and the
// data-parallel rank to forward to, under their pre-convention names and
// llm-d's current ones (x-llm-d-..., which its sidecar reads when the
// former is absent). llm-d's picker clears a client's own values under both
// names; passed on, they would steer the decode pod's sidecar past the
// pick.
var sidecarHeaders = []string{"x-encoder-hosts-ports", "x-kv-cache-source-host-port", "x-data-parallel-host-port",
	"x-llm-d-encoder-hosts-ports", "x-llm-d-kv-cache-source-host-port"}

// prefillerHeaders are the names of the prefill endpoint the picker sets
// on a split request and removes from any other: the pre-convention one and
// llm-d's current one.
var prefillerHeaders = [...]string{disagg.HeaderPrefiller, disagg.HeaderPrefillerLLMD}

// answerRequest sends the request-headers response naming the endpoint
// followed by its fallbacks (list) and, when the request has a body, the
// body back as streamed mutations of at most maxBodyChunk bytes. A prefill endpoint (a disaggregated
// request) is named in disagg.HeaderPrefiller, as llm-d's endpoint picker
// sets it for the decode pod's sidecar; without one a client's own value
// of that header is removed, as are a client's sidecarHeaders.
func (st *streamState) answerRequest(list []string, prefill string, body []byte, fallback bool) error {
	st.endpoint, st.list = list[0], list
	c := st.srv.cfg
	endpoint := strings.Join(list, ",")
	set := append(make([]*corev3.HeaderValueOption, 0, 4), header(c.DestinationHeader, endpoint))
	if st.rewrite != "" {
		h := header(":path", st.rewrite)
		h.AppendAction = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		set = append(set, h)
	}
	if body != nil {
		set = append(set, header("content-length", strconv.Itoa(len(body))))
	}
	if fallback {
		set = append(set, header(RenderFallbackHeader, "true"))
	}
	mut := &extprocv3.HeaderMutation{SetHeaders: set}
	switch {
	case prefill != "":
		// Under both names, as llm-d's picker writes it: every sidecar
		// reads one of them.
		for _, name := range prefillerHeaders {
			h := header(name, prefill)
			h.AppendAction = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD // never beside a client's value
			mut.SetHeaders = append(mut.SetHeaders, h)
		}
	default:
		for _, name := range prefillerHeaders {
			if len(st.header.Values(name)) > 0 {
				mut.RemoveHeaders = append(mut.RemoveHeaders, name)
			}
		}
	}
	for _, k := range sidecarHeaders {
		if len(st.header.Values(k)) > 0 {
			mut.RemoveHeaders = append(mut.RemoveHeaders, k)
		}
	}
	resp := &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
			Response: &extprocv3.CommonResponse{
				ClearRouteCache: true,
				HeaderMutation:  mut,
			},
		}},
		DynamicMetadata: destinationMetadata(c.MetadataNamespace, c.DestinationHeader, endpoint),
	}
	if err := st.send(resp); err != nil {
		return err
	}
	if body == nil {
		return nil
	}
	// The body goes back in chunks of at most maxBodyChunk bytes, the
	// last ending the stream (an empty body is one empty chunk) when a body
	// chunk ended it: when trailers did, Envoy sent no body end of stream
	// and the trailers' answer completes the request.
	for {
		n := min(len(body), maxBodyChunk)
		if err := st.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
			RequestBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{
				BodyMutation: streamedBody(body[:n], n == len(body) && !st.trailers),
			}},
		}}); err != nil || n == len(body) {
			return err
		}
		body = body[n:]
	}
}

func (st *streamState) responseHeaders(req *extprocv3.ProcessingRequest, h *extprocv3.HttpHeaders) error {
	c := st.srv.cfg
	served, ok := servedEndpoint(req.GetMetadataContext(), c.MetadataNamespace, c.ServedKey)
	st.served = served
	endpoint := st.endpoint
	if ok && st.endpoint != "" && served != st.endpoint {
		// Envoy fell back to another endpoint than the pick (a retry down
		// the list): the request's load moves to the fallback that served.
		st.srv.met.servedMismatch.Inc()
		if st.decision.Served(served) {
			st.srv.met.servedFallback.Inc()
			st.srv.notify(st.endpoint)
			st.srv.notify(served)
		}
		if slices.Contains(st.list, served) {
			endpoint = served
		}
	}
	set := make([]*corev3.HeaderValueOption, 0, 3)
	if endpoint != "" {
		set = append(set, header(EndpointHeader, endpoint))
	}
	if c.ConformanceTestHooks {
		if !ok {
			served = servedMissing
		}
		set = append(set, header(ConformanceServedHeader, served))
	}
	if st.decision != nil && st.decision.RenderErr != nil {
		set = append(set, header(RenderFallbackHeader, "true"))
	}
	if a := st.srv.session; a != nil && st.decision != nil && endpoint != "" {
		if endpoint != st.endpoint {
			a.Served(&st.req, endpoint) // the session's next turn goes where its blocks are
		}
		if c, ok := a.ResponseCookie(&st.req, endpoint); ok {
			// Beside the engine's cookies. Envoy's ext_proc filter reads
			// only the deprecated append, false when unset (it would
			// replace them); append_action says the same to those that
			// read it.
			h := header("set-cookie", c)
			h.Append = wrapperspb.Bool(true) //lint:ignore SA1019 the field Envoy's ext_proc reads
			h.AppendAction = corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
			set = append(set, h)
		}
	}
	if err := st.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{
			HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: set},
		}},
	}}); err != nil {
		return err
	}
	if st.scanning {
		// Response headers again (Envoy sends them once): the read begun
		// under the first gives its buffer back before another begins.
		st.scanning = false
		st.scan.Release()
	}
	if c.ObserveCachedTokens && st.decision != nil && len(st.decision.Roles) == 0 {
		// A split request's decoder reports the transferred prompt as
		// cached: no measure of what the index predicted for it.
		if code, sse := responseMeta(h.GetHeaders()); code/100 == 2 {
			st.scan = usage.Scanner{SSE: sse, Budget: &st.srv.bodies}
			st.scanning = true
		}
	}
	if h.GetEndOfStream() {
		st.release()
	}
	return nil
}

func (st *streamState) responseBody(b *extprocv3.HttpBody) error {
	if !st.firstOut {
		st.firstOut = true
		if st.decision != nil {
			st.decision.FirstChunk()
			st.srv.notify(st.decision.Endpoint.ID)
		}
	}
	if st.scanning {
		st.scan.Write(b.GetBody())
	}
	if b.GetEndOfStream() {
		st.release()
	}
	resp := &extprocv3.CommonResponse{}
	if !st.respPlain {
		resp.BodyMutation = streamedBody(b.GetBody(), b.GetEndOfStream())
	}
	return st.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
		ResponseBody: &extprocv3.BodyResponse{Response: resp},
	}})
}

// release ends the request's load accounting on the response path, with
// the cached tokens the response reported when it was read for them.
func (st *streamState) release() {
	var info kvroute.DoneInfo
	if st.scanning {
		st.scanning = false
		cached, result := st.scan.Result()
		st.srv.met.usage[result].Inc()
		if result == usage.Observed {
			info.CachedTokens, info.HasCachedTokens = cached, true
			st.observed, st.actual = true, cached
		}
	}
	if st.decision != nil && !st.done {
		st.done = true
		st.decision.Done(info)
		st.srv.notify(st.decision.Endpoint.ID)
	}
}

func (st *streamState) send(resp *extprocv3.ProcessingResponse) error {
	if err := st.stream.Send(resp); err != nil {
		if st.stream.Context().Err() != nil {
			return errStop
		}
		return err
	}
	return nil
}

// immediate answers the client directly (Envoy sends the response without
// contacting an upstream) and ends the stream.
func (st *streamState) immediate(code int, msg string, extra ...*corev3.HeaderValueOption) error {
	if err := st.stream.Send(immediateResponse(code, msg, extra...)); err != nil && st.stream.Context().Err() == nil {
		return err
	}
	return errStop
}

// headersOf converts Envoy's header map into an http.Header, and returns the
// :path pseudo-header without its query, and the query (with its "?").
func headersOf(m *corev3.HeaderMap) (h http.Header, path, query string) {
	hvs := m.GetHeaders()
	h = make(http.Header, len(hvs))
	vals := make([]string, 0, len(hvs)) // every header's first value, in one array
	for _, hv := range hvs {
		v := hv.GetValue()
		if len(hv.GetRawValue()) > 0 {
			v = string(hv.GetRawValue())
		}
		if hv.GetKey() == ":path" {
			if i := strings.IndexByte(v, '?'); i >= 0 {
				path, query = v[:i], v[i:]
			} else {
				path, query = v, ""
			}
			continue
		}
		if strings.HasPrefix(hv.GetKey(), ":") {
			continue
		}
		key := textproto.CanonicalMIMEHeaderKey(hv.GetKey())
		if prev, ok := h[key]; ok {
			h[key] = append(prev, v) // a repeated header: its own array from here
			continue
		}
		vals = append(vals, v)
		h[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	return h, path, query
}

// responseMeta reads a response's status code (0 when absent or malformed)
// and whether its body is a server-sent event stream.
func responseMeta(m *corev3.HeaderMap) (code int, sse bool) {
	for _, hv := range m.GetHeaders() {
		v := hv.GetValue()
		if len(hv.GetRawValue()) > 0 {
			v = string(hv.GetRawValue())
		}
		switch strings.ToLower(hv.GetKey()) {
		case ":status":
			if n, err := strconv.Atoi(v); err == nil {
				code = n
			}
		case "content-type":
			sse = strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), "text/event-stream")
		}
	}
	return code, sse
}

// refuseBodyMode answers a request with a body that Envoy does not send
// FULL_DUPLEX_STREAMED. In any other mode Envoy waits for the request
// headers' answer before it sends the body (NONE: never sends it), and the
// picker answers the headers only once the body ended: waiting would hold
// the request until Envoy's message_timeout, for the same misconfiguration
// on every request. It is answered at once, 500 naming the mode needed, and
// logged once per picker.
func (st *streamState) refuseBodyMode() error {
	st.setResult(resultBodyMode)
	msg := fmt.Sprintf("the endpoint picker needs the request body FULL_DUPLEX_STREAMED (Envoy's ext_proc processing_mode.request_body_mode); Envoy sends it %s", st.reqMode)
	if st.srv.bodyModeLogged.CompareAndSwap(false, true) {
		st.srv.log.Error("extproc: Envoy's ext_proc filter does not stream the request body full duplex; requests with a body are answered 500",
			"request_body_mode", st.reqMode.String(), "needed", filterv3.ProcessingMode_FULL_DUPLEX_STREAMED.String())
	}
	return st.immediate(http.StatusInternalServerError, msg)
}

// refuseBodyBudget answers a stream whose body, or the picker's copy of it,
// found no room in Config.MaxBodyBytesInFlight.
func (st *streamState) refuseBodyBudget() error {
	st.setResult(resultBodyBudget)
	return st.immediate(http.StatusServiceUnavailable, fmt.Sprintf(
		"the endpoint picker is holding its limit of %d bytes of request bodies in flight; retry later",
		st.srv.cfg.MaxBodyBytesInFlight), header("retry-after", "1"))
}

// jsonBody returns body as vLLM reads it (jsonscan.PythonJSON): FastAPI
// hands the body's bytes to Python's json.loads, which decodes a UTF-16 or
// UTF-32 body and reads a UTF-8 one past a leading byte order mark. A wide
// body becomes the UTF-8 JSON the engine reads the same, the copy charged
// to the body budget before it is made, and held with the body until the
// stream lets go of it; a UTF-8 one loses its mark. The error is that of a
// refusal it has answered: 400 for a wide body that is not text in its
// encoding (the message names it), 503 for no room in the budget.
func (st *streamState) jsonBody(body []byte) ([]byte, error) {
	out, err := jsonscan.PythonJSON(body, func(n int) error {
		if !st.srv.bodies.Acquire(int64(n)) {
			return bytebudget.ErrNoRoom
		}
		st.held += int64(n)
		return nil
	})
	switch {
	case errors.Is(err, bytebudget.ErrNoRoom):
		return nil, st.refuseBodyBudget()
	case err != nil:
		st.setResult(resultBadRequest)
		return nil, st.immediate(http.StatusBadRequest, "the request body is not a JSON object: "+err.Error())
	}
	st.body = out
	return out, nil
}

// dropTransferParams returns body without its top-level kv_transfer_params
// (Config.AllowClientKVTransferParams), the copy charged to the body budget
// with the body until the stream lets go of it, or the error of a refusal
// it has answered.
func (st *streamState) dropTransferParams(body []byte) ([]byte, error) {
	out, err := sidecar.LocalBody(body)
	if err != nil { // requestMembers read it as one object: not reached
		st.setResult(resultBadRequest)
		return nil, st.immediate(http.StatusBadRequest, "the request body is not a JSON object: "+err.Error())
	}
	taken := int64(cap(out))
	if !st.srv.bodies.Acquire(taken) {
		return nil, st.refuseBodyBudget()
	}
	st.held += taken
	st.body = out
	st.srv.met.transferRemoved.Inc()
	return out, nil
}
