package render

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/internal/bytebudget"
	"github.com/kvroute/kvroute/internal/h1pool"
	"github.com/kvroute/kvroute/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// Transport limits of the render client.
const (
	idleConnTimeout = 90 * time.Second
	// connBufferSize is the transport's read and write buffer per
	// connection: a 2,000-token render request or response (~12 KiB of
	// JSON) then goes out with its header in one write and comes back in
	// one or two reads, instead of the 4 KiB chunks of the default.
	connBufferSize = 32 << 10
	// failureLogInterval rate-limits the failure log line.
	failureLogInterval = 10 * time.Second
	// maxStatusBody is how much of a non-2xx body is read to classify it.
	maxStatusBody = 4 << 10
	// maxPooledBuffer bounds the response buffers kept for reuse.
	maxPooledBuffer = 4 << 20
)

// Client renders requests through vLLM render endpoints. It is safe for
// concurrent use. Create it with New and Close it when done.
type Client struct {
	cfg       Config
	transport *h1pool.Transport
	http      *http.Client
	picker    picker
	metrics   *metrics
	quiet     *metrics // registered nowhere: what probes count in (metricsFor)
	log       *slog.Logger
	modes     [2]modeState // messages, responses
	closed    atomic.Bool
	set       telemetry.Set // whose Registerer Close unregisters the owned metrics from

	lastFailureLog atomic.Int64 // unix nanos of the last failure log line
	now            func() time.Time
	clk            telemetry.Clock // the queue-wait and hedge timers
	hedgeTokens    atomic.Int64    // the hedge budget, in thousandths of a hedge
	tracer         trace.Tracer    // nil: no tracing

	wroteHook func()          // tests only: called when an exchange's request was written whole
	queueHook func()          // tests only: called when a request is about to wait for the discovery slot
	life      context.Context // canceled by Close: ends the exchanges of abandoned hedges
	endLife   context.CancelFunc
	backgroundGroup
}

// Options are a Client's injected dependencies; the zero value is valid.
type Options struct {
	// Set is the observability bundle (registerer, logger, tracer
	// provider, clock; see package telemetry):
	//   Registerer receives the render metrics; nil registers nothing.
	//   Collectors already registered by another Client are shared.
	//   Logger receives failure and mode lines; nil discards them.
	//   TracerProvider traces every HTTP attempt as a "render" span (endpoint,
	//   route, attempt, retry, status) under the caller's span; nil traces
	//   nothing.
	//   Clock times the render latency metric, the failure log's rate
	//   limit, the wait for a render slot (Config.MaxQueueWait), the
	//   endpoints' recent latency and the hedge timer; nil is the wall
	//   clock. The request budget and attempt timeouts stay wall time: they
	//   are deadlines of HTTP calls.
	telemetry.Set
	// TLSConfig is used for https renderer URLs; nil means the system roots.
	// HTTP/2 stays disabled either way.
	TLSConfig *tls.Config
}

// New builds a Client from cfg (zero durations, sizes and modes take their
// defaults; see Config) and its injected dependencies.
func New(cfg Config, opts Options) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	clk := opts.Clk()
	c := &Client{cfg: cfg, set: opts.Set, log: logger, now: clk.Now, clk: clk}
	c.life, c.endLife = context.WithCancel(context.Background())
	c.hedgeTokens.Store(hedgeBurst * hedgeTokenUnit)
	limit := *cfg.MaxConcurrency
	c.picker.newState = func() *endpointState { return &endpointState{gate: gate{limit: limit}} }
	c.picker.now = clk.Now
	m, err := newMetrics(opts.Set, c)
	if err != nil {
		return nil, fmt.Errorf("render: register metrics: %w", err)
	}
	c.metrics = m
	if c.quiet, err = newMetrics(telemetry.Set{}, c); err != nil {
		c.set.Unregister(m.owned...)
		return nil, fmt.Errorf("render: metrics: %w", err)
	}
	if opts.TracerProvider != nil {
		c.tracer = opts.TracerProvider.Tracer(TracerName)
	}
	c.transport = newTransport(opts.TLSConfig, cfg.MaxIdleConnsPerHost, limit, m)
	c.http = &http.Client{
		Transport: c.transport,
		// Render routes do not redirect; a 3xx is reported as a status.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if cfg.URL != "" {
		c.picker.fixed = newTarget(cfg.URL, cfg.URL, c.picker.newState())
	}
	for i := range c.modes {
		c.modes[i].slot = make(chan struct{}, 1)
	}
	return c, nil
}

// metricsFor returns the metrics the render of body counts in: the
// Client's, or for a mode-discovery probe (an expected 404 from a legacy
// renderer included) collectors registered nowhere, so that probes show in
// no render metric, as Discover says.
func (c *Client) metricsFor(body *wireBody) *metrics {
	if body.probe {
		return c.quiet
	}
	return c.metrics
}

// newTransport builds the render client's HTTP/1.1 keep-alive transport
// (internal/h1pool, shared with the gateway's engine pool): up to
// idlePerHost idle connections per host, no global cap, 90 s idle timeout,
// 32 KiB buffers, no proxy (renderers are in-cluster). The request is
// written and the answer read on the render's own goroutine, and reading
// the answer to its end gives the connection back to the pool before the
// render releases its slot. net/http's Transport, which the client used
// before, gives a connection back from a reader goroutine of its own, and
// only if its writer goroutine has reported the request written within
// 50 ms of the answer's end: on a CPU-starved machine it closed connections
// that way and the next render dialed a new one (connection churn at steady
// state). https renderers go to a net/http Transport (newTLSTransport).
//
// perHost (the render concurrency limit per endpoint; 0 for none) also caps
// the connections per host: a render past it waits for a connection given
// back or closed. The gate already holds the renders in flight to an
// endpoint at that limit, and a connection is back in the pool before its
// slot is released, so the cap only makes the bound explicit (and holds it
// for the https fallback, whose connections net/http gives back late).
//
// m, when set, counts the dials and the closes by reason
// (kvroute_render_connections_*).
func newTransport(tlsConfig *tls.Config, idlePerHost, perHost int, m *metrics) *h1pool.Transport {
	cfg := h1pool.Config{
		MaxIdlePerHost:  idlePerHost,
		MaxConnsPerHost: perHost,
		IdleTimeout:     idleConnTimeout,
		ReadBufferSize:  connBufferSize,
		WriteBufferSize: connBufferSize,
		Dialer:          &net.Dialer{KeepAlive: 30 * time.Second},
		Fallback:        newTLSTransport(tlsConfig, idlePerHost, perHost),
	}
	if m != nil {
		cfg.OnDial = m.connDialed.Inc
		cfg.OnClose = func(r h1pool.CloseReason) { m.connClosed[r].Inc() }
	}
	return h1pool.New(cfg)
}

// newTLSTransport builds the net/http transport of https renderers:
// HTTP/1.1 only, with newTransport's limits.
func newTLSTransport(tlsConfig *tls.Config, idlePerHost, perHost int) *http.Transport {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	d := &net.Dialer{KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext:         d.DialContext,
		Protocols:           protocols,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: idlePerHost,
		MaxConnsPerHost:     perHost,
		IdleConnTimeout:     idleConnTimeout,
		WriteBufferSize:     connBufferSize,
		ReadBufferSize:      connBufferSize,
	}
}

// Close rejects further calls, closes idle connections and unregisters the
// metrics this Client registered (not those it reused from another Client).
// Calls in flight finish normally; the losing attempts of hedged renders
// still reading their answers in the background are canceled and waited
// for. Close is idempotent.
func (c *Client) Close() {
	if c.closed.CompareAndSwap(false, true) {
		c.set.Unregister(c.metrics.owned...)
	}
	c.endLife()
	c.closeBackground()
	c.transport.Close()
}

// SetEndpoints replaces the set of render endpoints (typically the ready
// model-server endpoints). Calls pick round-robin over the set sorted by ID.
// Endpoints with an empty ID, an ID that is not UTF-8 or is longer than a
// host:port can be (it labels the capacity gauges) or an invalid URL are
// left out and reported in the returned error; the others are used. With a fixed Config.URL it returns
// ErrFixedURL and changes nothing.
//
// An endpoint keeps its slots, queue and recent latency by ID across
// updates, also across one that leaves it out while its renders still run
// (a readiness flap): coming back, it is still held to MaxConcurrency and
// MaxQueueWait with those renders counted.
//
// The connections to a renderer no longer in the set are closed: the idle
// ones at once, those in use when their render ends.
func (c *Client) SetEndpoints(eps []Endpoint) error {
	if c.picker.fixed != nil {
		return ErrFixedURL
	}
	err := c.picker.set(eps)
	now := c.picker.endpoints()
	hosts := make([]string, len(now))
	for i, e := range now {
		hosts[i] = h1pool.HostPort(e.URL)
	}
	c.transport.Retain(hosts)
	return err
}

// Endpoints returns the current endpoints, sorted by ID (the fixed URL, with
// itself as ID, when one is configured).
func (c *Client) Endpoints() []Endpoint { return c.picker.endpoints() }

// Render tokenizes req through a renderer and returns its prompts' token IDs,
// multimodal features and cache salt. Every failure is an *Error. The call is
// bounded by the API's budget (see Config) and by ctx; it is observed in the
// duration metric, counted in the failures metric unless the caller canceled,
// and logged at most once per 10 s.
func (c *Client) Render(ctx context.Context, req *Request) (*Result, error) {
	res := new(Result)
	if err := c.RenderInto(ctx, req, res); err != nil {
		return nil, err
	}
	return res, nil
}

// RenderInto is Render writing its answer into res, which it overwrites:
// the token ID arrays of the prompts res held are reused when large enough,
// so that a caller rendering request after request into one Result (a
// router's pooled scratch) allocates no token arrays. The caller must not
// keep res's earlier TokenIDs. On error res holds nothing usable.
func (c *Client) RenderInto(ctx context.Context, req *Request, res *Result) error {
	start := c.now()
	err := c.render(ctx, req, res)
	if err != nil {
		if (err.Reason == ReasonTimeout || err.Reason == ReasonConnection) && errors.Is(ctx.Err(), context.Canceled) {
			err.Reason = ReasonCanceled
		}
		c.metrics.observe(c.now().Sub(start).Seconds(), err)
		c.logFailure(err)
		return err
	}
	c.metrics.observe(c.now().Sub(start).Seconds(), nil)
	return nil
}

// budget returns the whole-render budget of a route.
func (c *Client) budget(r route) time.Duration {
	if r == routeCompletions {
		return c.cfg.Timeout
	}
	return max(c.cfg.Timeout, c.cfg.MMTimeout)
}

func (c *Client) render(ctx context.Context, req *Request, res *Result) *Error {
	if c.closed.Load() {
		return &Error{Reason: ReasonOther, Err: ErrClosed}
	}
	if req == nil {
		return &Error{Reason: ReasonOther, Err: fmt.Errorf("%w: nil request", ErrInvalidRequest)}
	}
	r, ok := req.API.route()
	if !ok {
		return &Error{Reason: ReasonOther, Err: fmt.Errorf("%w: unknown API %q", ErrInvalidRequest, req.API)}
	}
	bctx, cancel := context.WithTimeout(ctx, c.budget(r))
	defer cancel()

	// The body is checked (and the salt read) before any probe is sent.
	body, salt, hasSalt, err := prepareWireFor(r, req.Body, c.cfg.PrefillOnly, *c.cfg.OmitMMKwargs)
	if err != nil {
		return &Error{Reason: ReasonOther, Err: fmt.Errorf("%w: %w", ErrInvalidRequest, err)}
	}
	if r == routeMessages || r == routeResponses {
		mode, merr := c.modeFor(bctx, r, req.Authorization, req.Model)
		if merr != nil {
			return merr
		}
		if mode == ModeLegacy {
			// The translation is what is sent, with the same edits.
			var tr []byte
			tr, err = c.translate(r, req.Body, req.Model)
			if err == nil {
				body, _, _, err = prepareWire(tr, c.cfg.PrefillOnly, *c.cfg.OmitMMKwargs)
			}
			if err != nil {
				return &Error{Reason: ReasonOther, Err: err}
			}
			r = routeChat
		}
	}
	body.model, body.keepJSON = req.Model, req.KeepTokenJSON
	if e := c.call(bctx, r, &body, req.Authorization, res); e != nil {
		return e
	}
	// vLLM's Anthropic request model has no cache_salt (the key is dropped)
	// and its chat translation sets none: a Messages prompt is cached
	// unsalted, and only the renderer's answer tells otherwise.
	if hasSalt && req.API != APIMessages {
		res.CacheSalt = salt
	}
	return nil
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// initialResponseBuffer is the most a response buffer is grown to before
// its body arrives (the rest grows with the bytes read).
const initialResponseBuffer = 64 << 10

// attempt makes one HTTP attempt against t, capped by AttemptTimeout when
// an endpoint other than t serves the render (the cap leaves time for a
// retry there; the retry itself is capped too, as llm-d caps each attempt:
// a render with a fixed URL, or to the only endpoint serving its model, has
// the whole budget, llm-d's token producer having no cap beside a fixed
// URL), and decodes the answer into res.
// ex is the exchange the attempt runs in (nil: the caller waits for it):
// its answer is decoded into res only when the exchange claims it.
func (c *Client) attempt(ctx context.Context, t *target, r route, body *wireBody, auth string, res *Result, ex *exchange) *Error {
	actx := ctx
	if *c.cfg.AttemptTimeout > 0 && c.picker.hasOther(t, body.model, r) {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, *c.cfg.AttemptTimeout)
		defer cancel()
	}
	// The body goes out as one *bytes.Reader: net/http writes such a body
	// with its header in one write, while a reader it does not know as
	// in-memory (the parts themselves) gets its header flushed in a write
	// of its own and is copied through a fresh 32 KiB buffer.
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, t.urls[r], bytes.NewReader(body.flat()))
	if err != nil {
		return &Error{Reason: ReasonOther, Endpoint: t.id, Err: err}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if auth != "" {
		hreq.Header.Set("Authorization", auth)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return transportError(actx, t, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxStatusBody))
		// Drain a little more so that the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return statusError(t.id, resp.StatusCode, b)
	}

	limit := c.cfg.MaxResponseBytes
	if resp.ContentLength > limit {
		return &Error{Reason: ReasonDecode, Status: resp.StatusCode, Endpoint: t.id, Attempts: 1,
			Err: fmt.Errorf("%w: body of %d bytes exceeds the %d-byte cap", errDecode, resp.ContentLength, limit)}
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledBuffer {
			bufPool.Put(buf)
		}
	}()
	// The buffer grows with the bytes that actually arrive (ReadFrom
	// doubles it as needed), never to the announced Content-Length up
	// front: a renderer that announces 60 MiB and trickles its body would
	// otherwise hold 60 MiB per call from the first byte. Only a small
	// head start is taken from the header.
	if resp.ContentLength > 0 {
		buf.Grow(int(min(resp.ContentLength, initialResponseBuffer)) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(bytebudget.LimitPastCap(resp.Body, limit)); err != nil {
		// A body cut off by the network or the deadline after a 2xx header
		// is a transport failure (retried), not a decode failure.
		return transportError(actx, t, err)
	}
	if int64(buf.Len()) > limit {
		return &Error{Reason: ReasonDecode, Status: resp.StatusCode, Endpoint: t.id, Attempts: 1,
			Err: fmt.Errorf("%w: body exceeds the %d-byte cap", errDecode, limit)}
	}
	if ex != nil && !ex.claim() {
		return errAbandoned // the caller left: the answer was read, and is discarded
	}
	res.Endpoint = t.id
	if err := decodeResponse(buf.Bytes(), r == routeCompletions, body.prompts, body.keepJSON, res); err != nil {
		return &Error{Reason: ReasonDecode, Status: resp.StatusCode, Endpoint: t.id, Attempts: 1, Err: err}
	}
	return nil
}

// transportError classifies a failed exchange: a timeout when the attempt's
// context ended, a connection failure otherwise.
func transportError(actx context.Context, t *target, err error) *Error {
	if cerr := actx.Err(); cerr != nil {
		return &Error{Reason: ReasonTimeout, Endpoint: t.id, Attempts: 1, Err: cerr}
	}
	return &Error{Reason: ReasonConnection, Endpoint: t.id, Attempts: 1, Err: err}
}

// logFailure logs a failed call, at most once per failureLogInterval. It logs
// inside the call because the caller's deadline can discard the error.
func (c *Client) logFailure(e *Error) {
	if e.Reason == ReasonCanceled {
		return
	}
	now := c.now().UnixNano()
	last := c.lastFailureLog.Load()
	if last != 0 && now-last < int64(failureLogInterval) {
		return
	}
	if !c.lastFailureLog.CompareAndSwap(last, now) {
		return
	}
	c.log.Warn("render failed (further failures are not logged for 10s)",
		"reason", string(e.Reason), "status", e.Status, "endpoint", e.Endpoint,
		"attempts", e.Attempts, "error", e.Error())
}
