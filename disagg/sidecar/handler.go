package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/internal/jsonscan"
	"github.com/kvroute/kvroute/internal/upstreamfail"
)

// Handler is a decode pod's routing sidecar: an http.Handler in front of the
// local decode engine (Config.DecoderURL). A POST to /v1/completions,
// /v1/chat/completions, /v1/responses or /v1/messages (SplitPath) that
// names a prefiller in PrefillerHeader runs the
// two-step exchange (Exchange.Prefill, then the decoder with the transfer
// parameters); every other request, and one whose prefill step failed after
// the fallback, goes to the decoder as it came (the header removed), but
// for the client's own kv_transfer_params, removed from every request
// unless Config.AllowClientKVTransferParams (plainBody; see the package
// documentation).
// Responses, streamed or not, pass through unchanged, each write waiting at
// most Config.ResponseWriteTimeout for the client. A request it answers
// with an error of its own (or whose client goes away first) is counted by
// reason in kvroute_sidecar_refused_requests_total.
//
// Every request body is read whole, within Config.MaxBodyBytes (a larger
// one is answered 413), Config.BodyReadTimeout (408) and the Handler's
// budget of Config.MaxBodyBytesInFlight (503; the copies a split makes
// are charged to it too, and a split whose copies find no room goes to
// the decoder as it came, for a local prefill counted as
// ReasonBodyBudget), before anything goes to the decoder, which gets
// a copy the Handler owns. Handing the client's body itself to the decoder's
// transport breaks streams: net/http's server consumes and closes a
// request body once the response header goes out, and net/http's
// Transport may read the body once more after the decoder has answered
// (past the declared length, to check for extra bytes); that read then
// fails, the Transport closes the decoder connection, and the response
// being streamed breaks off. The copy also lets the Transport resend a
// request on a new connection when a reused one turns out closed by the
// decoder before anything was written (Request.GetBody). The decoder's
// request carries neither the client's Expect, a 100-continue the
// sidecar's own server has answered, nor, on a request with a body, an
// Upgrade offer.
//
// The Handler owns no goroutine beyond the ones net/http runs per request;
// Close releases idle connections and unregisters its metrics.
type Handler struct {
	x       *Exchange
	decoder *url.URL
	proxy   *httputil.ReverseProxy
	refused *prometheus.CounterVec // kvroute_sidecar_refused_requests_total{reason}
	removed prometheus.Counter     // kvroute_sidecar_client_transfer_params_removed_total
	reg     prometheus.Registerer  // where refused and removed are registered (nil: nowhere)
	budget  bytebudget.Budget      // request body bytes in flight, bounded by Config.MaxBodyBytesInFlight
}

// NewHandler builds the sidecar handler; cfg.DecoderURL is required.
func NewHandler(cfg Config, opts Options) (*Handler, error) {
	if cfg.DecoderURL == "" {
		return nil, errors.New("sidecar: decoderURL is required")
	}
	u, err := url.Parse(cfg.DecoderURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("sidecar: decoderURL %q is not an http(s) URL", cfg.DecoderURL)
	}
	refused, err := newRefused(opts.Registerer)
	if err != nil {
		return nil, err
	}
	removed, err := newTransferRemoved(opts.Registerer)
	if err == nil {
		var x *Exchange
		if x, err = NewExchange(cfg, opts); err == nil {
			return newHandler(x, u, refused, removed, opts.Registerer), nil
		}
		if opts.Registerer != nil {
			opts.Registerer.Unregister(removed)
		}
	}
	if opts.Registerer != nil {
		opts.Registerer.Unregister(refused)
	}
	return nil, err
}

// newHandler builds the Handler NewHandler returns from its parts.
func newHandler(x *Exchange, u *url.URL, refused *prometheus.CounterVec, removed prometheus.Counter, reg prometheus.Registerer) *Handler {
	h := &Handler{x: x, decoder: u, refused: refused, removed: removed, reg: reg}
	h.budget.Limit = x.cfg.MaxBodyBytesInFlight
	h.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Del(PrefillerHeader)
			pr.Out.Header.Del(PrefillerHeaderLLMD)
			// The client's Expect: 100-continue was its exchange with the
			// sidecar, which reads a body whole before anything goes to
			// the decoder: passed on, it would make the decoder's transport
			// wait for a 100 Continue (up to a second) to send a body it
			// already holds. The gateway and the prefill request drop it too.
			pr.Out.Header.Del("Expect")
			// Set here, after the proxy removed the hop-by-hop headers:
			// a client's Connection header naming X-Request-Id would
			// otherwise take the ID off the decode half only.
			if id, ok := pr.In.Context().Value(requestIDKey{}).(string); ok {
				pr.Out.Header.Set(RequestIDHeader, id)
			}
		},
		Transport:      x.client.Transport,
		FlushInterval:  -1, // stream every chunk at once (SSE)
		ErrorHandler:   h.decoderFailed,
		ModifyResponse: h.watchBody,
	}
	if h.proxy.Transport == nil {
		h.proxy.Transport = http.DefaultTransport
	}
	return h
}

// Exchange returns the handler's Exchange (its metrics, its config).
func (h *Handler) Exchange() *Exchange { return h.x }

// Close releases idle connections and unregisters the metrics NewHandler
// registered (its Exchange's too), so that another Handler can be built on
// the same registry. The Handler must not serve after.
func (h *Handler) Close() {
	h.x.Close()
	if h.reg != nil {
		h.reg.Unregister(h.refused)
		h.reg.Unregister(h.removed)
	}
}

// ResponsesPath is the Responses API's route, split as completions and
// chat completions are (SplitPath). vLLM's ResponsesRequest carries
// kv_transfer_params since 2026 (vllm-project/vllm#37424); an older vLLM
// answers the prefill request without them, and the request falls back to
// a local prefill (ReasonBadResponse).
const ResponsesPath = "/v1/responses"

// MessagesPath is the Anthropic Messages API's route, split as
// completions and chat completions are (SplitPath): vLLM's
// AnthropicMessagesRequest carries kv_transfer_params into the chat
// completion it serves the message as, and its AnthropicMessagesResponse
// answers them; the one token is asked for with max_tokens, which the
// Messages API requires.
const MessagesPath = "/v1/messages"

// SplitPath reports whether a POST to path is split when it names a
// prefiller: /v1/completions, /v1/chat/completions, ResponsesPath and
// MessagesPath, the routes whose bodies vLLM reads kv_transfer_params from
// and whose answers carry them back, as llm-d's sidecar splits them. Every
// other route is passed to the decoder as it came.
func SplitPath(path string) bool {
	switch path {
	case "/v1/completions", "/v1/chat/completions", ResponsesPath, MessagesPath:
		return true
	}
	return false
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := prefillerTarget(r.Header)
	split := target != "" && r.Method == http.MethodPost && SplitPath(r.URL.Path)
	var body []byte
	// What body holds of the budget: given back after the response (the
	// decoder's request holds the body until then), or once a split has
	// built the decode body that replaces it.
	var held int64
	defer func() { h.budget.Release(held) }()
	if r.ContentLength != 0 { // a body, of known length or chunked
		var err error
		body, held, err = h.readBody(w, r)
		if err != nil {
			h.refuseBody(w, r, err)
			return
		}
	}
	if split {
		h.split(w, r, target, body, &held)
		return
	}
	if r.ContentLength == 0 { // no body to hand over
		h.x.m.requests.WithLabelValues(OutcomePlain).Inc()
		g := h.stallGuard(w)
		defer g.Stop()
		h.proxy.ServeHTTP(g, r)
		return
	}
	out, pheld, err := h.plainBody(r, body)
	defer h.budget.Release(pheld)
	switch {
	case errors.Is(err, bytebudget.ErrNoRoom):
		h.refuseBudget(w, r)
		return
	case err != nil:
		h.refused.WithLabelValues(refusedBadBody).Inc()
		writeError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if pheld > 0 { // a copy without the client's parameters replaces the body
		h.budget.Release(held)
		held = 0
	}
	h.x.m.requests.WithLabelValues(OutcomePlain).Inc()
	h.forward(w, r, out, "")
}

// split runs the exchange for r, whose body holds *held of the budget,
// with the prefiller at hostPort, and forwards the body it yields to the
// decoder. Every copy made of the body is charged to the budget (copies);
// once the decode body is built, the bodies it replaces are dropped and
// given back, so that a request holds one body of the budget while the
// decoder answers, as a request proxied as it came does.
func (h *Handler) split(w http.ResponseWriter, r *http.Request, hostPort string, body []byte, held *int64) {
	// Read as vLLM reads the body: past a leading UTF-8 byte order mark, a
	// UTF-16 or UTF-32 body decoded (its UTF-8 copy charged to the budget).
	// The body is within Config.MaxBodyBytes as it came (readBody).
	text, theld, err := h.jsonText(body)
	defer func() { h.budget.Release(theld) }()
	c := &copies{budget: &h.budget}
	defer c.releaseAll()
	var res Result
	if err == nil {
		res, err = h.x.prefillText(r.Context(), target{hostPort: hostPort}, r.URL.Path, r.Header, text, c)
	}
	switch {
	case err == nil:
		if !res.Split && h.x.cfg.AllowClientKVTransferParams {
			// A local prefill: the decoder gets the body it gets with no
			// prefiller named, the client's kv_transfer_params kept.
			res.DecodeBody = body
		} else if res.clientParams {
			h.removed.Inc()
		}
		if !sameArray(res.DecodeBody, res.LocalBody) { // a copy for a retry the Handler never makes
			res.LocalBody = nil
			c.release(copyLocal)
		}
		if !sameArray(res.DecodeBody, text) {
			h.budget.Release(theld)
			theld = 0
		}
		if !sameArray(res.DecodeBody, body) {
			h.budget.Release(*held)
			*held = 0
		}
		h.forward(w, r, res.DecodeBody, res.RequestID)
	case errors.Is(err, bytebudget.ErrNoRoom):
		h.refuseBudget(w, r)
	case errors.Is(err, ErrBadRequest):
		h.refused.WithLabelValues(refusedBadBody).Inc()
		writeError(w, r, http.StatusBadRequest, err.Error())
	default: // the client went away during the prefill step: nothing to answer
		h.refused.WithLabelValues(refusedClientGone).Inc()
	}
}

// jsonText is the package's jsonText for a Handler: a wide body's UTF-8
// copy is charged to the budget before it is made (held, which the caller
// releases once done with it); bytebudget.ErrNoRoom when there is no room
// for it.
func (h *Handler) jsonText(body []byte) (text []byte, held int64, err error) {
	text, err = jsonscan.PythonJSON(body, func(n int) error {
		if !h.budget.Acquire(int64(n)) {
			return bytebudget.ErrNoRoom
		}
		held = int64(n)
		return nil
	})
	if err != nil && !errors.Is(err, bytebudget.ErrNoRoom) {
		err = notText(err)
	}
	return text, held, err
}

// forward proxies r to the decoder with body, which the Handler owns, in
// place of r's own body (see Handler), and X-Request-Id set to requestID
// unless it is "".
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, body []byte, requestID string) {
	ctx := r.Context()
	if requestID != "" {
		ctx = context.WithValue(ctx, requestIDKey{}, requestID)
	}
	out := r.Clone(ctx)
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	out.TransferEncoding = nil // the length is known now
	out.Header.Set("Content-Length", strconv.Itoa(len(body)))
	// No protocol switch for a request whose body the sidecar has read:
	// the proxy would pass the client's Upgrade on (with a Connection:
	// Upgrade of its own), and vLLM's server (uvicorn with httptools)
	// answers a POST offering Upgrade: h2c, as Java and Ktor clients send
	// it, as if it had no body. A request without a body (a WebSocket
	// handshake) keeps its Upgrade (ServeHTTP).
	out.Header.Del("Upgrade")
	g := h.stallGuard(w)
	defer g.Stop()
	h.proxy.ServeHTTP(g, out)
}

// requestIDKey keys, in the context of a request forward hands the proxy,
// the X-Request-Id the proxy's Rewrite sets on the decode half.
type requestIDKey struct{}

// decoderFailed answers r's client with 502 after the request to the
// decoder failed with err before any response header. The error names the
// decoder's address and the operating system's error, which the client is
// not to see: the client gets the fixed text of the failure's kind, the
// log the whole error, and kvroute_sidecar_refused_requests_total the kind
// as its reason.
func (h *Handler) decoderFailed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		h.x.lg.DebugContext(r.Context(), "client went away before the decoder answered", "err", err, "path", r.URL.Path)
		h.refused.WithLabelValues(refusedClientGone).Inc()
		return
	}
	k := upstreamfail.Classify(err)
	h.x.lg.WarnContext(r.Context(), "decoder request failed", "kind", k.String(), "err", err, "path", r.URL.Path,
		"request_id", r.Header.Get(RequestIDHeader))
	h.refused.WithLabelValues(decoderReasons[k]).Inc()
	writeError(w, r, http.StatusBadGateway, "the decoder "+k.Text())
}

// writeError answers r with an error of the sidecar's own in the shape of
// r's API, as the engine behind it answers its errors: Anthropic's
// {"type":"error","error":{type,message}} on /v1/messages, vLLM's OpenAI
// {"error":{message,type,param,code}} elsewhere.
func writeError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	var b any
	if strings.TrimRight(r.URL.Path, "/") == MessagesPath {
		b = anthropicError{Type: "error", Error: anthropicErrorInfo{Type: anthropicType(status), Message: msg}}
	} else {
		b = openAIError{Error: openAIErrorInfo{Message: msg, Type: openAIType(status), Code: status}}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(b)
}

// openAIError is vLLM's ErrorResponse; Param is always null.
type openAIError struct {
	Error openAIErrorInfo `json:"error"`
}

type openAIErrorInfo struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

// anthropicError is Anthropic's error response.
type anthropicError struct {
	Type  string             `json:"type"`
	Error anthropicErrorInfo `json:"error"`
}

type anthropicErrorInfo struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// openAIType is the OpenAI error type of the statuses the sidecar answers.
func openAIType(status int) string {
	switch status {
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	case http.StatusBadGateway:
		return "BadGatewayError"
	}
	return "BadRequestError"
}

// anthropicType is the Anthropic error type of the statuses the sidecar
// answers.
func anthropicType(status int) string {
	switch status {
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusServiceUnavailable:
		return "overloaded_error"
	case http.StatusBadGateway:
		return "api_error"
	}
	return "invalid_request_error"
}
