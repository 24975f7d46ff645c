package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/internal/h1pool"
	"github.com/kvroute/kvroute/internal/recent"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// DefaultMaxBodyBytes is the default request body limit: far above any
// text prompt that fits a context window, low enough to stop a runaway
// upload.
const DefaultMaxBodyBytes = 32 << 20

// DefaultBodyReadTimeout is the default of Config.BodyReadTimeout.
const DefaultBodyReadTimeout = 30 * time.Second

// DefaultResponseWriteTimeout is the default of Config.ResponseWriteTimeout.
const DefaultResponseWriteTimeout = time.Minute

// DefaultMaxIdleConnsPerHost is the default idle-connection cap per engine
// of the Handler's own transport. The pool only ever holds as many
// connections as were in flight to an engine at once, so a cap above the
// offered concurrency costs nothing at low load and keeps a busy gateway
// from closing and redialing connections after every burst.
const DefaultMaxIdleConnsPerHost = 1024

// Config configures a Handler.
type Config struct {
	// Model is the base model name the engines serve. A request whose body
	// names another model is routed as a LoRA adapter of that name (with
	// ServerConfig.Models, as a model of its own unless an engine lists it
	// as an adapter; see models.go). Empty means the body's model is the
	// base model.
	Model string `json:"model"`
	// MaxBodyBytes limits the request body; a larger body is answered 413.
	// 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64 `json:"maxBodyBytes"`
	// MaxBodyBytesInFlight bounds the bytes that the bodies of all requests
	// in flight hold together, from their first byte until their response
	// ends. Bodies are buffered as their bytes arrive, so a body holds what
	// it has sent (at most twice that), not what its Content-Length
	// announces. A body the model rewrite table changed
	// (ServerConfig.Models) holds its rewritten copy as well, charged when
	// it is made, as does a split request in exchange mode the copies its
	// exchange makes (the parsed members and the prefill body during the
	// prefill step, then the decode body, the body with the prefiller's
	// transfer parameters, whose room is reserved before the prefiller is
	// sent anything): a split whose copies find no room goes to the decode
	// endpoint as it came, for a local prefill (X-Kvroute-Prefill-Fallback
	// body_budget). A request whose body, or a copy it cannot go without,
	// finds no room is answered 503 with a Retry-After and counted as
	// result "body_budget".
	// With ObserveCachedTokens, the buffer that reads a response's usage (a
	// JSON body, or one line of a stream, at most 1 MiB) is charged too; a
	// response whose buffer finds no room is passed through unread (usage
	// result "no_room").
	// 0 means DefaultMaxBodyBytesInFlight (or MaxBodyBytes when that is
	// larger); a value below MaxBodyBytes is an error, since a body at the
	// limit could never pass.
	MaxBodyBytesInFlight int64 `json:"maxBodyBytesInFlight"`
	// BodyReadTimeout is the time a client has to send the whole request
	// body, counted from the end of its header; a body still incomplete then
	// is answered 408, its connection closed, and counted as result
	// "body_timeout". It stops clients that trickle a body to hold a
	// connection and its buffer. The default allows DefaultMaxBodyBytes at
	// about 1.1 MB/s. 0 means DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration `json:"bodyReadTimeout"`
	// ResponseWriteTimeout is the time each write of a proxied response
	// may wait for the client to take it. A client that stops reading (a
	// stalled connection, a stream it never drains) would otherwise keep
	// its request open for as long as it keeps the connection: its body's
	// share of MaxBodyBytesInFlight, which other clients' bodies then find
	// full, its engine request and its routing load. Past the timeout the
	// response is cut, the engine request cancelled, and the request
	// counted as result "client_stalled". The deadline restarts at every
	// write, so a slow stream that the client keeps reading is never cut.
	// 0 means DefaultResponseWriteTimeout.
	ResponseWriteTimeout time.Duration `json:"responseWriteTimeout"`
	// MaxIdleConnsPerHost caps the idle keep-alive connections the
	// Handler's own transport keeps per engine (unused with
	// Options.Transport). Size it at or above the peak concurrent requests
	// per engine; below that, connections are closed after a burst and
	// redialed in the next one. It also caps the transport's warm-ahead:
	// an engine whose last idle connection is taken is dialed up to the
	// gateway's peak of requests in flight, so that a request does not
	// wait for a dial at a concurrency the gateway has seen (unless the
	// engine closes idle connections itself). 0 means
	// DefaultMaxIdleConnsPerHost.
	MaxIdleConnsPerHost int `json:"maxIdleConnsPerHost"`
	// ObserveCachedTokens reads the cached prompt tokens the engine reports
	// in each response's usage (vLLM started with
	// --enable-prompt-tokens-details) and ends the request with them
	// (kvroute.Decision.Done with DoneInfo.CachedTokens), closing the loop on
	// the index's accuracy.
	// Leave it off for engines that do not report them: a usage without the
	// details reads as 0 cached tokens. Streams carry usage only when the
	// client asked for stream_options.include_usage.
	ObserveCachedTokens bool `json:"observeCachedTokens"`
	// TokenizeOnce lists the APIs whose requests are forwarded with the
	// prompt the router rendered, as token IDs, instead of its text, so that
	// the engine does not tokenize it again (see tokenin.go). Only
	// render.APICompletions qualifies: on the other APIs the engine takes no
	// token-ID prompt with the same response, and New refuses them. A
	// request that was not rendered, or whose prompt is not text, or that
	// sets echo, is forwarded as it came. Empty, the default, forwards every
	// body unchanged.
	TokenizeOnce []render.API `json:"tokenizeOnce"`
	// AllowClientKVTransferParams forwards the kv_transfer_params member a
	// client's body carries. By default the gateway removes it (counted in
	// kvroute_gateway_client_transfer_params_removed_total): vLLM's KV
	// connectors act on it, and a client's do_remote_prefill with its own
	// remote_host would make the engine pull KV blocks from whatever
	// address the client names; the transfer parameters of a split request
	// are the gateway's (exchange mode) or the decode pod's sidecar's to
	// set. Set it only behind a trusted component that disaggregates
	// itself and sends kvroute requests with transfer parameters already
	// set.
	AllowClientKVTransferParams bool `json:"allowClientKVTransferParams"`
	// CORSAllowedOrigins lists the origins ("scheme://host[:port]", or "*"
	// for any) whose browsers may read the answers the gateway writes
	// itself (its 400, 404, 405, 408, 413, 429, 502 and 503): set it to
	// the engines' --allowed-origins, so that a browser client refused by
	// the gateway reads why, as it reads the engine's own errors, instead
	// of a network error. Responses from an engine keep exactly the
	// engine's CORS headers and preflights are answered by the engine, so
	// the gateway grants nothing the engine's policy refuses. Empty, the
	// default: the gateway's own answers carry no CORS headers.
	CORSAllowedOrigins []string `json:"corsAllowedOrigins"`
	// CORSAllowCredentials is the engines' --allow-credentials for the
	// gateway's own answers (Access-Control-Allow-Credentials: true, the
	// origin echoed even under "*"). It needs CORSAllowedOrigins.
	CORSAllowCredentials bool `json:"corsAllowCredentials"`
}

// Options are the injected dependencies of a Handler or a Server; the zero
// value is valid.
type Options struct {
	// Set is the gateway's observability (see package telemetry):
	//   Registerer receives the gateway's metrics; nil registers nothing
	//   (NewServer requires nil: it serves its own registry).
	//   Logger receives the gateway's logs; nil discards them.
	//   TracerProvider traces each inference request as a server span that
	//   joins the client's W3C trace context (traceparent) and is propagated
	//   to the engine; the Router's spans nest under it when the Router has
	//   the same provider. nil traces nothing (the client's traceparent is
	//   still passed on unchanged).
	//   Clock is the clock of the latency metrics (pick and first chunk)
	//   and, for NewServer, the Router's clock too (speculative expiry, the
	//   request table's expiry, the event streams' timers); nil is the wall
	//   clock. The body read timeout and the upstream connections' idle
	//   limit stay wall time: they are socket deadlines and the engines'
	//   keep-alive timers.
	telemetry.Set
	// Transport carries the upstream requests; nil uses the Handler's own
	// HTTP/1.1 keep-alive client (plain HTTP to the engines; other schemes
	// through a dedicated http.Transport), without HTTP/2 and without
	// transparent compression.
	Transport http.RoundTripper
}

// Handler is the reverse proxy: it serves the four inference routes, vLLM's
// token-in GeneratePath, GET /v1/models and POST /v1/messages/count_tokens,
// and answers 404 to everything else. It is safe for concurrent use.
type Handler struct {
	cfg       Config
	picker    kvroute.Picker
	transport http.RoundTripper
	ownsTr    *h1pool.Transport // closed by Close when the Handler made it
	log       *slog.Logger
	met       *metrics
	now       func() time.Time
	endpoints atomic.Pointer[[]kvroute.Endpoint]
	models    atomic.Uint64 // round-robin cursor of GET /v1/models
	recent    recent.Ring[DecisionRecord]
	history   shareHistory          // predicted vs engine-reported cached share, for the status page
	ids       *requestIDs           // IDs of requests that come without X-Request-Id
	tracer    trace.Tracer          // nil: no spans
	budget    bytebudget.Budget     // request body bytes in flight
	admission *admission.Controller // nil: no admission headers read (admission.go)
	exchanger *exchangeState        // nil: split requests go out with x-prefiller-host-port (exchange.go)
	served    *models.Registry      // nil: one model (ServerConfig.Models; models.go)
	session   *session.Affinity     // nil: no session cookie set (ServerConfig.Session)
	tokenIn   map[render.API]bool   // Config.TokenizeOnce (tokenin.go)
	cors      *corsPolicy           // Config.CORSAllowedOrigins; nil: none (cors.go)
	// release hands a request's Decision back to its picker once the
	// handler has made its last use of it: (*kvroute.Decision).Release,
	// which lets a Router reuse it for a later pick; tests count it.
	release func(*kvroute.Decision)
	// inflight counts the inference requests being served: their peak is
	// the most requests one engine can get at once, which sizes the
	// warm-ahead of the Handler's own transport (upstream.go, internal/h1pool).
	inflight atomic.Int64
}

// New builds a Handler that routes with picker (required). Give it endpoints
// with SetEndpoints.
func New(cfg Config, picker kvroute.Picker, opts Options) (*Handler, error) {
	if picker == nil {
		return nil, errors.New("gateway: a Picker is required")
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("gateway: maxBodyBytes %d is negative", cfg.MaxBodyBytes)
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	switch {
	case cfg.MaxBodyBytesInFlight < 0:
		return nil, fmt.Errorf("gateway: maxBodyBytesInFlight %d is negative", cfg.MaxBodyBytesInFlight)
	case cfg.MaxBodyBytesInFlight == 0:
		cfg.MaxBodyBytesInFlight = max(DefaultMaxBodyBytesInFlight, cfg.MaxBodyBytes)
	case cfg.MaxBodyBytesInFlight < cfg.MaxBodyBytes:
		return nil, fmt.Errorf("gateway: maxBodyBytesInFlight %d is below maxBodyBytes %d: a body at the limit could never be read",
			cfg.MaxBodyBytesInFlight, cfg.MaxBodyBytes)
	}
	if cfg.BodyReadTimeout < 0 {
		return nil, fmt.Errorf("gateway: bodyReadTimeout %v is negative", cfg.BodyReadTimeout)
	}
	if cfg.BodyReadTimeout == 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.ResponseWriteTimeout < 0 {
		return nil, fmt.Errorf("gateway: responseWriteTimeout %v is negative", cfg.ResponseWriteTimeout)
	}
	if cfg.ResponseWriteTimeout == 0 {
		cfg.ResponseWriteTimeout = DefaultResponseWriteTimeout
	}
	if cfg.MaxIdleConnsPerHost < 0 {
		return nil, fmt.Errorf("gateway: maxIdleConnsPerHost %d is negative", cfg.MaxIdleConnsPerHost)
	}
	if cfg.MaxIdleConnsPerHost == 0 {
		cfg.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	tokenIn, err := tokenInAPIs(cfg.TokenizeOnce)
	if err != nil {
		return nil, err
	}
	cors, err := newCORSPolicy(cfg.CORSAllowedOrigins, cfg.CORSAllowCredentials)
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, picker: picker, transport: opts.Transport, log: opts.Log(), now: opts.Clk().Now, ids: newRequestIDs(), tokenIn: tokenIn,
		release: (*kvroute.Decision).Release, cors: cors}
	h.budget.Limit = cfg.MaxBodyBytesInFlight
	if opts.TracerProvider != nil {
		h.tracer = opts.TracerProvider.Tracer("github.com/kvroute/kvroute/gateway")
	}
	if h.transport == nil {
		h.ownsTr = newUpstreamTransport(cfg.MaxIdleConnsPerHost)
		h.transport = h.ownsTr
	}
	if h.met, err = newMetrics(opts.Set, h.budget.InUse, h.resends); err != nil {
		if h.ownsTr != nil {
			h.ownsTr.Close()
		}
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	empty := []kvroute.Endpoint{}
	h.endpoints.Store(&empty)
	return h, nil
}

// newTransport returns the transport for engines not reached by plain HTTP:
// keep-alive connections to the
// engines (up to idlePerHost idle per engine, no global cap), no HTTP/2
// (engines speak HTTP/1.1) and no transparent gzip (the client's
// Accept-Encoding passes through and the body is copied as is).
func newTransport(idlePerHost int) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: idlePerHost,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		// A prompt of thousands of tokens goes out with its header in one
		// write instead of 4 KiB chunks (one syscall each).
		WriteBufferSize: 32 << 10,
	}
}

// resends is the requests the Handler's own transport sent to an engine a
// second time (0 with Options.Transport).
func (h *Handler) resends() int64 {
	if h.ownsTr == nil {
		return 0
	}
	return h.ownsTr.Stats().Resends
}

// SetEndpoints replaces the candidate endpoints of every later request. It
// does not touch the Picker: a Router is told about endpoints separately
// (Server.SetEndpoints does both). The connections of a transport the
// Handler created to an endpoint no longer in the set are closed: the idle
// ones at once, those in use when their request ends.
func (h *Handler) SetEndpoints(eps []kvroute.Endpoint) {
	c := slices.Clone(eps)
	if c == nil {
		c = []kvroute.Endpoint{}
	}
	h.endpoints.Store(&c)
	if h.ownsTr != nil {
		hosts := make([]string, len(c))
		for i, e := range c {
			hosts[i] = endpointHostPort(e)
		}
		h.ownsTr.Retain(hosts)
	}
}

// Endpoints returns the current candidate endpoints (a copy).
func (h *Handler) Endpoints() []kvroute.Endpoint { return slices.Clone(*h.endpoints.Load()) }

// Close stops the warm-ahead dials of a transport the Handler created (see
// Config.MaxIdleConnsPerHost), releases its idle upstream connections and
// unregisters the metrics New registered and those of the exchange mode
// (they keep counting for requests still in flight, which Close does not
// affect). It is idempotent.
func (h *Handler) Close() {
	if h.exchanger != nil {
		h.exchanger.close()
	}
	if h.ownsTr != nil {
		h.ownsTr.Close()
	}
	h.met.unregister()
}

// ServeHTTP routes one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.cors.set(w.Header(), r.Header.Get("Origin")) // for the gateway's own answers; forward replaces them by the engine's
	api, ok := render.APIForPath(r.URL.Path)
	trimmed := strings.TrimRight(r.URL.Path, "/")
	if !ok && trimmed == GeneratePath {
		api, ok = apiGenerate, true
	}
	models := trimmed == modelsPath
	if models && r.URL.Path != modelsPath {
		// As for an inference path below: vLLM would answer the slashed
		// path with a redirect to its own address.
		r = withPath(r, modelsPath)
	}
	counting := trimmed == countTokensPath
	if (ok || models || counting) && corsPreflight(r) {
		// The engine's CORS policy (vLLM's --allowed-origins) answers it.
		h.serveOne(w, r)
		return
	}
	if ok {
		if r.Method != http.MethodPost {
			h.met.byAPI[api].results[ResultBadRequest].Inc()
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, api, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed; use POST")
			return
		}
		if p := strings.TrimRight(r.URL.Path, "/"); p != r.URL.Path {
			// The engine gets the API's own path: vLLM answers one with a
			// trailing slash by a redirect to its own address (the Host
			// the gateway sends), which the client would follow past the
			// gateway.
			r = withPath(r, p)
		}
		h.serveInference(w, r, api)
		return
	}
	if models {
		if !h.readOnly(w, r, modelsPath) {
			return
		}
		h.serveModels(w, r)
		return
	}
	if counting {
		h.serveCountTokens(w, r)
		return
	}
	h.met.unrouted.Inc()
	writeError(w, render.APICompletions, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
}

// readOnly reports whether r, for path (one of methodPaths), is a GET or a
// HEAD; any other method is answered 405 with Allow, as vLLM's router
// answers a method a route does not serve (not 404: the path is known),
// and counted.
func (h *Handler) readOnly(w http.ResponseWriter, r *http.Request, path string) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	h.met.notAllowed[path].Inc()
	w.Header().Set("Allow", "GET, HEAD")
	writeError(w, render.APICompletions, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed; use GET")
	return false
}

// modelsPath is vLLM's model listing, which the gateway forwards.
const modelsPath = "/v1/models"

// withPath returns a shallow copy of r whose URL has path p.
func withPath(r *http.Request, p string) *http.Request {
	c := *r
	u := *r.URL
	u.Path, u.RawPath = p, ""
	c.URL = &u
	return &c
}

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

// corsPreflight reports whether r is a browser's CORS preflight: an
// OPTIONS with Origin and Access-Control-Request-Method.
func corsPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" &&
		r.Header.Get("Access-Control-Request-Method") != ""
}

// serveModels forwards GET /v1/models to the endpoints in turn.
func (h *Handler) serveModels(w http.ResponseWriter, r *http.Request) {
	if h.served != nil {
		h.serveServedModels(w)
		return
	}
	h.serveOne(w, r)
}

// serveOne forwards r, without a body or a routing decision, to the
// endpoints in turn.
func (h *Handler) serveOne(w http.ResponseWriter, r *http.Request) {
	eps := *h.endpoints.Load()
	if len(eps) == 0 {
		writeError(w, render.APICompletions, http.StatusServiceUnavailable, "the gateway has no endpoints")
		return
	}
	ep := eps[(h.models.Add(1)-1)%uint64(len(eps))]
	res, _ := h.forward(w, r, nil, &kvroute.Decision{Endpoint: ep}, h.now(), nil, nil, nil)
	if res == ResultUpstreamBroken {
		panic(http.ErrAbortHandler)
	}
}

// writeError writes an error in the shape of api: Anthropic's for Messages,
// OpenAI's (as vLLM sends it, param null) otherwise.
func writeError(w http.ResponseWriter, api render.API, status int, msg string) {
	writeParamError(w, api, status, msg, "")
}

// writeParamError is writeError naming param, the request's offending
// member, in OpenAI's shape ("" is null); Anthropic's has no param.
func writeParamError(w http.ResponseWriter, api render.API, status int, msg, param string) {
	var v any
	if api == render.APIMessages {
		v = map[string]any{"type": "error", "error": map[string]any{"type": anthropicType(status), "message": msg}}
	} else {
		var p any
		if param != "" {
			p = param
		}
		v = map[string]any{"error": map[string]any{"message": msg, "type": openAIType(status), "param": p, "code": status}}
	}
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(v) // maps of strings and ints always encode
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func openAIType(status int) string {
	switch status {
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusMethodNotAllowed, http.StatusConflict,
		http.StatusRequestTimeout:
		return "BadRequestError"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	case http.StatusTooManyRequests:
		return "RateLimitError"
	default:
		return "InternalServerError"
	}
}

func anthropicType(status int) string {
	switch status {
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusConflict, http.StatusRequestTimeout:
		return "invalid_request_error"
	case http.StatusServiceUnavailable:
		return "overloaded_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	default:
		return "api_error"
	}
}
