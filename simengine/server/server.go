package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Defaults of Config.
const (
	DefaultMaxTokens    = 16
	DefaultMaxBodyBytes = 32 << 20
)

// Config configures one simulated vLLM server.
type Config struct {
	// Model is the served model name (vLLM --model / --served-model-name):
	// with ServedModelAliases, the first served name, the one responses
	// report, metrics are labelled with and adapters are parented on.
	Model string `json:"model"`
	// ServedModelAliases are the base model's further served names, vLLM's
	// --served-model-name after the first: each is listed on /v1/models
	// after Model with its root and max_model_len, and a request naming one
	// runs on the base model's engine and cache (aliases.go). Each must be
	// non-empty, given once, and none of Model, LoRAModules or ExtraModels.
	ServedModelAliases []string `json:"servedModelAliases"`
	// ModelPath is the root /v1/models gives the base model under each of
	// its names: vLLM's --model (the weights' path or hub name) when
	// --served-model-name names the model otherwise. Empty: Model, as vLLM
	// serves a model under its --model when given no other name.
	ModelPath string `json:"modelPath"`
	// LoRAModules are adapter names served on top of Model, each once; a
	// request naming one runs with that LoRA (lora_id = position + 1).
	LoRAModules []string `json:"loraModules"`
	// AllowRuntimeLoRAUpdating is vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING:
	// it serves POST /v1/load_lora_adapter and /v1/unload_lora_adapter,
	// which register and forget adapters at run time (lora_admin.go).
	// Without it both paths are a bare 404, as in vLLM.
	AllowRuntimeLoRAUpdating bool `json:"allowRuntimeLoraUpdating"`
	// EnableTowerConnectorLoRA is vLLM's --enable-tower-connector-lora: an
	// adapter also changes a multimodal item's embedding, so for a request
	// with an adapter each item is identified as "lora_name:mm_hash" in the
	// blocks' extra keys (vLLM's _get_mm_identifier) instead of its bare
	// mm_hash. The versions of vLLM that also put a fingerprint of the
	// adapter's path in the identifier are not modelled.
	EnableTowerConnectorLoRA bool `json:"enableTowerConnectorLoRA"`
	// EnableScaleOut registers the render routes (vLLM --enable-scale-out);
	// without it they answer a bare {"detail":"Not Found"} 404, as vLLM 0.30.
	EnableScaleOut bool `json:"enableScaleOut"`
	// MaxModelLen bounds prompt + max_tokens (default: the KV-cache capacity).
	MaxModelLen int `json:"maxModelLen"`
	// DefaultMaxTokens is used when a request sets no output limit (default 16).
	DefaultMaxTokens int `json:"defaultMaxTokens"`
	// MaxBodyBytes bounds request bodies (default 32 MiB).
	MaxBodyBytes int64 `json:"maxBodyBytes"`
	// Engine configures the engine model; its Registerer is replaced by the
	// server's registry. A Sink set here receives events too.
	Engine simengine.Config `json:"engine"`
	// KVEvents is the --kv-events-config; when active the server publishes
	// the engine's events through a publish.Publisher in KVEventsFormat
	// ("current" or "legacy").
	KVEvents       KVEventsConfig `json:"kvEvents"`
	KVEventsFormat string         `json:"kvEventsFormat"`
	// RenderWorkers, when positive, makes the render routes saturate like
	// a vLLM renderer: at most RenderWorkers renders are worked on at once
	// and the others wait, first come, first served (see renderPool).
	// 0, the default, renders at once.
	RenderWorkers int `json:"renderWorkers"`
	// RenderTokenCost is how long a render worker spends per prompt token
	// (with RenderWorkers). A vLLM renderer spends about 0.1 s on a
	// 49k-token prompt, some 2 µs per token.
	RenderTokenCost time.Duration `json:"renderTokenCost"`
	// SnapshotUnavailableFor makes the snapshot socket (KVEvents'
	// snapshot_endpoint) answer "unavailable, retry later" for this long
	// after start, as a vLLM recorder does while it cannot serve.
	SnapshotUnavailableFor time.Duration `json:"snapshotUnavailableFor"`
	// KeepAliveTimeout is how long a connection may stay idle after a
	// response before the server closes it, as vLLM's
	// VLLM_HTTP_TIMEOUT_KEEP_ALIVE sets uvicorn's timeout_keep_alive. 0
	// means DefaultKeepAliveTimeout, vLLM's default; a test whose subject
	// is a client's connection reuse sets it far above its gaps, so that
	// a machine slowed by other work does not make the engine close what
	// the client kept.
	KeepAliveTimeout time.Duration `json:"keepAliveTimeout"`
	// PD is the engine's role in prefill/decode disaggregation and its KV
	// transfer (pd.go); the zero value is an ordinary engine.
	PD PDConfig `json:"pd"`
	// ExtraModels are further models this address serves, each by an
	// engine of its own configured like Engine, publishing its KV events on
	// kv@<ip:port>@<model> through the server's one publisher (models.go
	// says what this models). A request's model field selects the engine.
	ExtraModels []string `json:"extraModels"`
	// EnableRequestIDHeaders is vLLM's --enable-request-id-headers: every
	// response carries an X-Request-Id header, the request's own (its
	// first value) or, without one, a random uuid4 in hex. Without it no
	// response carries one. The ids in response bodies follow the request's
	// X-Request-Id either way (requestid.go).
	EnableRequestIDHeaders bool `json:"enableRequestIdHeaders"`
}

// Options are a Server's injected dependencies; the zero value is valid.
type Options struct {
	// Registry receives the server's, the engine's and the publisher's
	// metrics and is served on /metrics; nil creates a private one.
	Registry *prometheus.Registry
	// Logger receives lifecycle logs; nil discards.
	Logger *slog.Logger
	// Clock times the KV-event publisher's idle heartbeats (with a
	// snapshot_endpoint); nil is the wall clock. The engine itself runs on
	// the wall clock.
	Clock telemetry.Clock
}

// Server is a simulated vLLM OpenAI-compatible server: the HTTP routes over a
// real-time simengine.Engine, and optionally its KV-event publisher.
//
// Ownership: Start starts one goroutine that runs Serve until Close shuts
// srv down, and then closes serveDone, which Close waits for (a Serve the
// host calls itself runs on the host's goroutine and is not waited for).
// srv serves each connection on a goroutine of its own, which runs
// ServeHTTP. mu guards addr, set by Start or the first Serve and read by
// Addr, and serveDone, set by Start and read by Close. nextID is an atomic
// and closeOnce runs Close's work once; the other fields are set by New and
// not written after (render, tok, pd and the engines synchronise their own
// state).
type Server struct {
	cfg     Config
	eng     *simengine.Engine
	extra   map[string]*simengine.Engine // ExtraModels' engines (models.go); read-only after New
	pub     *EventPublisher
	reg     *prometheus.Registry
	lg      *slog.Logger
	routes  map[string]route
	metrics http.Handler
	reqs    *prometheus.CounterVec
	loras   *loraRegistry // LoRAModules, then the adapters loaded at run time (lora_admin.go)
	nonce   string
	nextID  atomic.Uint64
	created int64

	srv       *http.Server
	mu        sync.Mutex
	addr      net.Addr
	serveDone chan struct{}
	closeOnce sync.Once
	render    *renderPool // nil: renders answer at once

	tok *tokenizations // prompts tokenized from text (tokenin.go)
	pd  *pdState       // P/D role and KV transfer (pd.go)
}

type route struct {
	method string
	h      http.HandlerFunc
}

// New builds the server: it validates the config, binds the KV-event sockets
// when configured and starts the engine. Serve or Start then serve HTTP.
func New(cfg Config, opts Options) (*Server, error) {
	if cfg.Model == "" {
		return nil, errors.New("simengine: a model name is required")
	}
	if cfg.DefaultMaxTokens == 0 {
		cfg.DefaultMaxTokens = DefaultMaxTokens
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.KeepAliveTimeout == 0 {
		cfg.KeepAliveTimeout = DefaultKeepAliveTimeout
	}
	switch {
	case cfg.DefaultMaxTokens < 1:
		return nil, fmt.Errorf("simengine: defaultMaxTokens %d must be positive", cfg.DefaultMaxTokens)
	case cfg.MaxBodyBytes < 1:
		return nil, fmt.Errorf("simengine: maxBodyBytes %d must be positive", cfg.MaxBodyBytes)
	case cfg.MaxModelLen < 0:
		return nil, fmt.Errorf("simengine: maxModelLen %d is negative (0 means the KV-cache capacity)", cfg.MaxModelLen)
	case cfg.KeepAliveTimeout < 0:
		return nil, fmt.Errorf("simengine: keepAliveTimeout %v is negative (0 means %v, vLLM's default)", cfg.KeepAliveTimeout, DefaultKeepAliveTimeout)
	}
	if err := checkExtraModels(&cfg); err != nil {
		return nil, err
	}
	if err := checkAliases(&cfg); err != nil {
		return nil, err
	}
	format, err := ParseEventFormat(cfg.KVEventsFormat)
	if err != nil {
		return nil, err
	}
	if err := cfg.KVEvents.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	s := &Server{cfg: cfg, reg: opts.Registry, lg: opts.Logger, loras: newLoRARegistry(), created: time.Now().Unix()}
	for _, name := range cfg.LoRAModules {
		if _, dup := s.loras.id(name); dup || name == "" || name == cfg.Model {
			return nil, fmt.Errorf("simengine: bad LoRA module name %q (empty, repeated, or the model's)", name)
		}
		s.loras.add(name, name)
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	s.nonce = hex.EncodeToString(nonce[:])
	s.reqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "simengine_http_requests_total",
		Help: "HTTP requests served by the simulated engine, by route and status code.",
	}, []string{"route", "code"})
	if err := s.reg.Register(s.reqs); err != nil {
		return nil, fmt.Errorf("simengine: registering metrics: %w", err)
	}
	if s.render, err = newRenderPool(cfg, s.reg); err != nil {
		return nil, fmt.Errorf("simengine: %w", err)
	}
	if s.tok, err = newTokenizations(s.reg); err != nil {
		return nil, fmt.Errorf("simengine: registering metrics: %w", err)
	}
	if s.pd, err = newPDState(cfg.PD, s.reg); err != nil {
		return nil, err
	}
	if cfg.KVEvents.Active() {
		s.pub, err = NewEventPublisher(cfg.KVEvents, format, Options{Registry: s.reg, Logger: s.lg, Clock: opts.Clock})
		if err != nil {
			return nil, err
		}
		s.pub.snapshotUnavailableFor(cfg.SnapshotUnavailableFor)
		if cfg.Engine.Sink != nil {
			cfg.Engine.Sink = multiSink{cfg.Engine.Sink, s.pub}
		} else {
			cfg.Engine.Sink = s.pub
		}
	}
	cfg.Engine.Model = cfg.Model
	s.eng, err = simengine.NewRealTime(cfg.Engine, simengine.Options{Set: telemetry.Set{Registerer: s.reg, Logger: s.lg}})
	if err != nil {
		if s.pub != nil {
			_ = s.pub.Close()
		}
		return nil, err
	}
	if err := s.startExtraEngines(cfg.Engine, format); err != nil {
		s.eng.Close()
		if s.pub != nil {
			_ = s.pub.Close()
		}
		return nil, err
	}
	s.pd.leases.release = func(l lease) { s.eng.ReleaseKV(l.engID) }
	ec := s.eng.Config()
	if s.cfg.MaxModelLen == 0 {
		usable := ec.NumGPUBlocks
		if ec.NullBlock {
			usable-- // the null block holds no tokens
		}
		s.cfg.MaxModelLen = usable * ec.BlockSize
	}
	s.metrics = promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	s.routes = s.buildRoutes()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: headerTimeout, IdleTimeout: cfg.KeepAliveTimeout}
	return s, nil
}

func (s *Server) buildRoutes() map[string]route {
	r := map[string]route{
		"/v1/completions":      {http.MethodPost, s.handleCompletions},
		"/v1/chat/completions": {http.MethodPost, s.handleChat},
		"/v1/messages":         {http.MethodPost, s.handleMessages},
		CountTokensPath:        {http.MethodPost, s.handleCountTokens},
		"/v1/responses":        {http.MethodPost, s.handleResponses},
		"/v1/models":           {http.MethodGet, s.handleModels},
		"/health":              {http.MethodGet, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }},
		"/reset_prefix_cache":  {http.MethodPost, s.handleReset},
		"/metrics":             {http.MethodGet, s.metrics.ServeHTTP},
	}
	if s.pub != nil {
		r[SuppressKVEventsPath] = route{http.MethodPost, s.handleSuppress}
	}
	if s.cfg.AllowRuntimeLoRAUpdating {
		r["/v1/load_lora_adapter"] = route{http.MethodPost, s.handleLoadLoRA}
		r["/v1/unload_lora_adapter"] = route{http.MethodPost, s.handleUnloadLoRA}
	}
	if s.pd.cfg.Role == RolePrefill {
		r[KVTransferReadPath] = route{http.MethodPost, s.handleKVRead}
	}
	if s.cfg.EnableScaleOut {
		r["/v1/completions/render"] = route{http.MethodPost, s.handleCompletionsRender}
		r["/v1/chat/completions/render"] = route{http.MethodPost, s.handleChatRender}
		r["/v1/messages/render"] = route{http.MethodPost, s.handleMessagesRender}
		r["/v1/responses/render"] = route{http.MethodPost, s.handleResponsesRender}
		r[GeneratePath] = route{http.MethodPost, s.handleGenerate}
	}
	return r
}

// ServeHTTP dispatches like vLLM's FastAPI app: unknown paths (including the
// render routes without EnableScaleOut) get {"detail":"Not Found"}, a wrong
// method {"detail":"Method Not Allowed"}.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, ok := s.routes[r.URL.Path]
	label := r.URL.Path
	if !ok {
		label = "other"
	}
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	if s.cfg.EnableRequestIDHeaders {
		echoRequestID(sw, r)
	}
	defer func() { s.reqs.WithLabelValues(label, strconv.Itoa(sw.code)).Inc() }()
	switch {
	case !ok:
		writeDetail(sw, http.StatusNotFound, "Not Found")
	case r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead):
		sw.Header().Set("Allow", rt.method)
		writeDetail(sw, http.StatusMethodNotAllowed, "Method Not Allowed")
	default:
		rt.h(sw, r)
	}
}

// Handler returns the HTTP handler (the Server itself), for httptest servers.
func (s *Server) Handler() http.Handler { return s }

// Engine returns the engine model behind the server.
func (s *Server) Engine() *simengine.Engine { return s.eng }

// Registry returns the registry /metrics serves.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Model returns the served model name (the first one with aliases).
func (s *Server) Model() string { return s.cfg.Model }

// KVEventsEndpoint is the bound PUB address ("tcp://host:port"), "" when
// events are off.
func (s *Server) KVEventsEndpoint() string {
	if s.pub == nil {
		return ""
	}
	return s.pub.Endpoint()
}

// ReplayEndpoint is the bound replay address, "" when off.
func (s *Server) ReplayEndpoint() string {
	if s.pub == nil {
		return ""
	}
	return s.pub.ReplayEndpoint()
}

// Publisher returns the KV-event publisher, nil when events are off.
func (s *Server) Publisher() *EventPublisher { return s.pub }

// Serve serves HTTP on l until Close; it returns nil after Close.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.addr == nil {
		s.addr = l.Addr()
	}
	s.mu.Unlock()
	// A connection's first header timeout starts at its first byte, as
	// vLLM's does (see firstByteConn).
	if err := s.srv.Serve(firstByteListener{Listener: l, timeout: headerTimeout}); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves in the
// background until Close.
func (s *Server) Start(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.addr = l.Addr()
	s.serveDone = make(chan struct{})
	done := s.serveDone
	s.mu.Unlock()
	go func() {
		defer close(done)
		if err := s.Serve(l); err != nil {
			s.lg.Error("simulated engine HTTP server stopped", "err", err)
		}
	}()
	return nil
}

// Addr returns the listening address after Start or Serve ("" before).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.addr == nil {
		return ""
	}
	return s.addr.String()
}

// Close aborts in-flight requests, stops the engine, the HTTP server and the
// publisher, and waits for Start's goroutine. It is idempotent.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.render.close()
		s.eng.Close()
		s.closeExtraEngines()
		s.pd.close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if e := s.srv.Shutdown(ctx); e != nil {
			err = errors.Join(err, s.srv.Close())
		}
		s.mu.Lock()
		done := s.serveDone
		s.mu.Unlock()
		if done != nil {
			<-done
		}
		if s.pub != nil {
			err = errors.Join(err, s.pub.Close())
		}
	})
	return err
}

// statusWriter records the status code for the request counter and keeps
// streaming working (http.ResponseController unwraps it).
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestID returns a unique id with vLLM's prefix ("cmpl-", "chatcmpl-", …).
func (s *Server) requestID(prefix string) string {
	return prefix + s.nonce + strconv.FormatUint(s.nextID.Add(1), 16)
}
