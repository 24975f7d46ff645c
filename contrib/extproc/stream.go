package extproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/usage"
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
	badHint  string // why the subset hint is malformed; "" when it is not
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
	moved    string            // served, once Decision.Served moved the request's load there
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
		st.srv.notify(st.accountedAt())
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
		st.subset, st.hasHint, st.badHint = subsetHint(md, st.srv.cfg.SubsetNamespace, st.srv.cfg.SubsetKey)
		if st.badHint != "" {
			st.srv.met.invalidHints.Inc()
		}
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
		if !st.headers {
			return st.protocolError(protoRequestBody, "a request body came before the request headers")
		}
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
		// Either way they come once, after the headers.
		if !st.headers {
			return st.protocolError(protoRequestTrailers, "request trailers came before the request headers")
		}
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
	if err := st.stream.Send(immediateResponse(anthropicPath(st.path), code, msg, extra...)); err != nil && st.stream.Context().Err() == nil {
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
