package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
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
)

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
	// inflight counts the inference requests being served whose whole
	// body has been read: their peak is the most requests one engine can
	// get at once, which sizes the warm-ahead of the Handler's own
	// transport (upstream.go, internal/h1pool).
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
// Accept-Encoding passes through and the body is copied as is). The
// connection is bounded as a plain-HTTP one is: its dial, and then its TLS
// handshake (upstreamTLSHandshakeTimeout), past which the request is a 502
// upstream_timeout rather than waiting as long as its client does.
func newTransport(idlePerHost int) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: upstreamTLSHandshakeTimeout,
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

// upstreamTLSHandshakeTimeout bounds the TLS handshake with an engine
// named by an https Address: net/http's default transport's 10 s, far
// above a handshake on a cluster network. Tests shorten it.
var upstreamTLSHandshakeTimeout = 10 * time.Second

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
