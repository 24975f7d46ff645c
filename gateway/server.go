package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/internal/connwatch"
	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/telemetry"
)

// Policy selects how a Server picks endpoints.
type Policy string

// The routing policies.
const (
	// PolicyPrecise routes with a kvroute.Router: precise prefix-cache
	// routing fed by the engines' KV events and render endpoints.
	PolicyPrecise Policy = "precise"
	// PolicyRoundRobin routes cache-blind, in turn (for comparisons).
	PolicyRoundRobin Policy = "round-robin"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Listen is the TCP address to serve on, e.g. ":8080" or "127.0.0.1:0"
	// (a free port; Server.Addr tells which).
	Listen string
	// Policy is the routing policy; empty means PolicyPrecise.
	Policy Policy
	// Router configures the kvroute.Router of PolicyPrecise.
	Router kvroute.Config
	// Proxy configures the Handler. An empty Proxy.Model takes Router.Model.
	Proxy Config
	// Endpoints are the initial endpoints; SetEndpoints replaces them.
	Endpoints []kvroute.Endpoint
	// ReadHeaderTimeout is the time a client has to send a request's
	// header: from the connection's start for its first request, from the
	// first byte of each later one on a keep-alive connection. A connection
	// whose header is late is closed and counted in
	// kvroute_gateway_header_timeouts_total. The body has
	// Proxy.BodyReadTimeout after it on every path: a request answered
	// without reading its body (a 404, a 405, /health) still has that time
	// to send it, as net/http reads an unread body (up to 256 KiB) before
	// the answer, and a body late then has its connection closed after the
	// answer. 0 means DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request before it is closed. 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Admission, when set, puts an admission stage (package admission) in
	// front of the Router's picks: requests carry their objective, fairness
	// ID and queue timeout in the headers HeaderObjective (or
	// HeaderObjectiveLLMD), HeaderFairnessID and HeaderQueueTimeout; shed
	// requests are answered 429 with Retry-After, those that found no free
	// endpoint in time 503, both naming the reason in HeaderAdmission. Nil
	// admits every request at once. PolicyPrecise only.
	Admission *admission.Config
	// AdmissionDetectors are the engines' saturation signals the admission
	// consults besides kvroute's own accounting (see admission.Detector).
	AdmissionDetectors []admission.Detector
	// EngineMetrics, when set with Admission, scrapes every endpoint's
	// Prometheus metrics (package enginemetrics) and adds the engines'
	// waiting queues and KV-cache usage to the admission's saturation
	// signals; an endpoint whose scrape is stale is judged by kvroute's own
	// accounting.
	EngineMetrics *enginemetrics.Config
	// Disagg, when set, makes the Router's profile step package disagg's
	// prefill/decode Profile: each request goes to a decode endpoint
	// (Endpoint.Role decode, both or none) and, when the decider splits
	// it, names its prefill endpoint in the x-prefiller-host-port header
	// for the decode pod's routing sidecar. Nil picks in one role among
	// every endpoint. PolicyPrecise only.
	Disagg *disagg.Config
	// DisaggHost is how the gateway carries out Disagg's split decisions:
	// in header mode (the default) it names the prefill endpoint in
	// x-prefiller-host-port for the decode pod's sidecar; in exchange mode
	// it runs the two-step exchange itself (sidecar.Exchange, whose
	// kvroute_sidecar_* metrics it then serves). Set only with Disagg.
	DisaggHost DisaggHostConfig
	// LoRA, when set, adds the LoRA adapter-affinity scorer (package lora)
	// to the Router's scorers: a request whose model names an adapter goes
	// preferably to an engine running it, as the engines' own
	// vllm:lora_requests_info says. It reads the engine-metrics scraper,
	// built with EngineMetrics (or its defaults when EngineMetrics is nil,
	// in which case the scraper feeds only this scorer). An endpoint whose
	// metrics cannot be scraped is scored neutral and counted in
	// kvroute_lora_candidates_total{state="unknown"}; the request is still
	// routed by load. PolicyPrecise only.
	LoRA *lora.Config
	// Session, when set, turns session affinity on (package session): a
	// request's session key (headers x-session-id, x-dynamo-session-id,
	// x-smg-routing-key, the llm-d-session cookie, or derived from the
	// body when configured) makes the Router prefer the endpoint that
	// served the session's last turn, weighed against its load; with
	// Router.Cluster the sessions are shared with the other replicas. A
	// response to a request without a key sets llm-d's session cookie
	// (llm-d-session=<base64 of the endpoint's ID>; Path=/; HttpOnly;
	// SameSite=Lax) unless Session.SetCookie is false, so a client that
	// keeps cookies sticks. A malformed key is skipped and counted, or
	// answered 400 with Session.Strict. PolicyPrecise only.
	Session *session.Config
	// Models, when set, serves several models behind one Router (package
	// models): each endpoint's served models come from Models.Served, its
	// Models.Label, the engines' /v1/models (Models.Poll) or its own
	// Endpoint.Models; a request is routed only among the endpoints
	// serving its model (after Models.Rewrites), a model none serves is
	// answered 404, and GET /v1/models lists the served models with the
	// cards the engines' /v1/models gave them (vLLM's ModelCard: root,
	// parent, max_model_len). A model an engine's /v1/models lists with a
	// parent (a LoRA adapter of that base model), or Models.Adapters names
	// the base of, is routed as a LoRA request (kvroute.Request.LoRA), for
	// the LoRA scorer. Nil: one model, Router.Model. PolicyPrecise only.
	Models *models.Config
	// Approximate configures the approximate prefix index of the endpoints
	// whose KV-event stream is not live (package approx; approx.Config.Enabled
	// turns it on). Nil is approx.Config{}: none kept, such endpoints are
	// routed blind. When enabled (and its capacityFrom is not "config"),
	// each endpoint's index is sized to its engine's own capacity, read
	// from vLLM's vllm:cache_config_info by the engine-metrics scraper
	// (built with EngineMetrics' settings, or, when nothing else reads it,
	// every CapacityScrapeInterval); an engine whose metrics cannot be
	// read gets the configured capacity, counted in
	// kvroute_approx_capacity_fallbacks_total and shown on the status page. Either way the status page, /ready and
	// kvroute_router_decision_mode_total show each endpoint's and each
	// decision's mode. PolicyPrecise only.
	Approximate *approx.Config
	// PeerLoadFromMetrics gives the Router an estimate of the load the
	// other gateway replicas (and any client that reaches the engines
	// directly) carry on each endpoint: every scrape interval, each
	// engine's scraped waiting and running requests less the ones this
	// gateway has open there (enginemetrics.PeerLoads, into the Router's
	// tokenload.Tracker as its peers' share). For active-active replicas
	// that share no state: each otherwise sees only its own requests, and
	// a request sends no KV event before its prefill starts. The scraper is
	// built with EngineMetrics' settings (or its defaults). It cannot be
	// combined with Router.Cluster, which shares the peers' load itself.
	// PolicyPrecise only.
	PeerLoadFromMetrics bool
}

// Server is a running gateway: a Handler on an http.Server with /metrics
// (the registry of the router, the render client, the index and the gateway,
// plus Go and process metrics) and /health, built around a kvroute.Router.
//
// Ownership: NewServer starts the goroutine that runs srv.Serve, stores
// its result in serveErr and closes stopped (Done) and, with
// ServerConfig.PeerLoadFromMetrics, the peer feed's (peerFeed). Requests
// run on net/http's connection goroutines and count in handlers. The
// components NewServer builds (router, scraper, admission, lora, disagg,
// models) run their own goroutines, which their Close stops. Shutdown, once
// (shutdownOnce, which also guards shutdownErr), stops the feed and the
// components the handlers wait on, then the models poller (it calls
// SetEndpoints), then srv, waits for Serve's result, waits for handlers and
// closes the handler and the router last. epMu serialises SetEndpoints and
// guards rawEp; the other fields are set by NewServer and not written
// after.
type Server struct {
	router    *kvroute.Router        // nil under PolicyRoundRobin
	approx    *approx.Index          // the router's approximate index and mode table; nil under PolicyRoundRobin
	admission *admission.Controller  // nil without ServerConfig.Admission
	disagg    *disagg.Profile        // nil without ServerConfig.Disagg
	scraper   *enginemetrics.Scraper // nil without ServerConfig.EngineMetrics, ServerConfig.LoRA, ServerConfig.PeerLoadFromMetrics and an enabled ServerConfig.Approximate
	peers     *peerFeed              // nil without ServerConfig.PeerLoadFromMetrics
	lora      *lora.Scorer           // nil without ServerConfig.LoRA
	session   *session.Affinity      // nil without ServerConfig.Session
	models    *models.Registry       // nil without ServerConfig.Models
	handler   *Handler
	registry  *prometheus.Registry
	srv       *http.Server
	ln        net.Listener
	log       *slog.Logger
	cfg       ServerConfig   // as served, defaults applied; the status page shows it
	handlers  sync.WaitGroup // requests being served
	stopped   chan struct{}  // closed when Serve has returned (Done)
	serveErr  error          // Serve's result; written before stopped is closed

	headerTimeouts *connwatch.Watcher

	epMu  sync.Mutex         // serializes SetEndpoints (the models poller calls it too)
	rawEp []kvroute.Endpoint // the endpoints as last given, before Models are annotated

	draining atomic.Bool // set by Drain, for good; /ready reads it

	shutdownOnce sync.Once
	shutdownErr  error
}

// NewServer builds the router and the handler, listens on cfg.Listen and
// starts serving. Stop it with Shutdown. opts.Logger, opts.TracerProvider
// and opts.Clock go to the router, the admission stage and the engine
// metrics scraper it builds and to the handler, opts.Transport to the
// handler; opts.Registerer must be nil, since the Server registers
// everything in the registry it serves on /metrics.
//
// ctx bounds the router's start only (kvroute.New: restoring the index from
// peers, a checkpoint file or other sources), so that a gateway interrupted
// while it bootstraps stops at once; ending ctx later does not stop the
// Server.
func NewServer(ctx context.Context, cfg ServerConfig, opts Options) (*Server, error) {
	if opts.Registerer != nil {
		return nil, errors.New("gateway: NewServer serves its own registry on /metrics; leave Options.Registerer nil")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.ReadHeaderTimeout < 0:
		return nil, fmt.Errorf("gateway: readHeaderTimeout %v is negative", cfg.ReadHeaderTimeout)
	case cfg.ReadHeaderTimeout == 0:
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	switch {
	case cfg.IdleTimeout < 0:
		return nil, fmt.Errorf("gateway: idleTimeout %v is negative", cfg.IdleTimeout)
	case cfg.IdleTimeout == 0:
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	s := &Server{registry: prometheus.NewRegistry(), log: logger, stopped: make(chan struct{}), headerTimeouts: newHeaderTimeouts()}
	if err := s.registry.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := s.registry.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	var picker kvroute.Picker
	switch cfg.Policy {
	case "", PolicyPrecise:
		ropts := kvroute.Options{Set: telemetry.Set{Registerer: s.registry, Logger: logger, TracerProvider: opts.TracerProvider, Clock: opts.Clock}}
		var acfg approx.Config
		if cfg.Approximate != nil {
			acfg = *cfg.Approximate
		}
		if err := acfg.Validate(); err != nil {
			return nil, fmt.Errorf("gateway: approximate: %w", err)
		}
		capacities := acfg.Enabled && acfg.CapacityFrom != approx.CapacityFromConfig
		if cfg.EngineMetrics != nil && cfg.Admission == nil && cfg.LoRA == nil && !capacities && !cfg.PeerLoadFromMetrics {
			return nil, errors.New("gateway: engineMetrics feeds the admission stage, the lora scorer, the approximate index's capacities and peerLoadFromMetrics; set admission, lora, approximate.enabled or peerLoadFromMetrics too")
		}
		if cfg.PeerLoadFromMetrics && cfg.Router.Cluster.Enabled() {
			return nil, errors.New("gateway: peerLoadFromMetrics estimates what a cluster shares exactly; set one or the other")
		}
		if cfg.EngineMetrics != nil || cfg.LoRA != nil || capacities || cfg.PeerLoadFromMetrics {
			var emc enginemetrics.Config
			switch {
			case cfg.EngineMetrics != nil:
				emc = *cfg.EngineMetrics
			case cfg.LoRA == nil && cfg.Admission == nil && !cfg.PeerLoadFromMetrics:
				// Only the capacities read it, and they change when an
				// engine restarts: no need to scrape every 50ms.
				emc = enginemetrics.Config{Interval: CapacityScrapeInterval, Staleness: 3 * CapacityScrapeInterval}
			}
			sc, err := enginemetrics.New(emc, enginemetrics.Options{Set: ropts.Set})
			if err != nil {
				return nil, err
			}
			s.scraper = sc
		}
		aopts := approx.Options{Set: telemetry.Set{Registerer: s.registry, Logger: logger, Clock: opts.Clock}}
		if capacities {
			aopts.Capacities = scraperCapacities{s.scraper}
		}
		ix, err := approx.New(acfg, aopts)
		if err != nil {
			s.closeAdmission()
			return nil, fmt.Errorf("gateway: approximate: %w", err)
		}
		s.approx, ropts.Approximate = ix, ix
		if cfg.LoRA != nil {
			ls, err := lora.New(*cfg.LoRA, s.scraper, lora.Options{Set: ropts.Set})
			if err != nil {
				s.closeAdmission()
				return nil, err
			}
			s.lora = ls
			ropts.Scorers = append(ropts.Scorers, ls.Weighted())
		}
		if cfg.Admission != nil {
			detectors := slices.Clone(cfg.AdmissionDetectors)
			if cfg.EngineMetrics != nil {
				detectors = append(detectors, s.scraper)
			}
			aopts := admission.Options{Set: ropts.Set, Detectors: detectors}
			if cfg.EngineMetrics != nil {
				aopts.Signals = s.scraper // the dispatch gate's headroom
			}
			a, err := admission.New(*cfg.Admission, aopts)
			if err != nil {
				s.closeAdmission()
				return nil, err
			}
			s.admission, ropts.Admission = a, a
		}
		if err := cfg.DisaggHost.Validate(); err != nil {
			s.closeAdmission()
			return nil, err
		}
		if cfg.Disagg == nil && cfg.DisaggHost != (DisaggHostConfig{}) {
			s.closeAdmission()
			return nil, errors.New("gateway: disaggHost is set without disagg")
		}
		if cfg.Disagg != nil {
			if err := cfg.DisaggHost.ValidateFor(*cfg.Disagg); err != nil {
				s.closeAdmission()
				return nil, err
			}
		}
		if cfg.Session != nil {
			aff, err := session.New(*cfg.Session, session.Options{Set: ropts.Set})
			if err != nil {
				s.closeAdmission()
				return nil, err
			}
			s.session = aff
			ropts.Scorers = append(ropts.Scorers, aff.Scorer())
		}
		if cfg.Disagg != nil {
			// The decode pick replaces the router's one-role pick, so the
			// scorers that say where a request should decode go to it too:
			// a session's next turn prefers the decode endpoint holding it,
			// an adapter the engines already running it.
			dopts := disagg.Options{Set: ropts.Set}
			if s.lora != nil {
				dopts.DecodeScorers = append(dopts.DecodeScorers, s.lora.Weighted())
			}
			if s.session != nil {
				dopts.DecodeScorers = append(dopts.DecodeScorers, s.session.Scorer())
			}
			p, err := disagg.New(*cfg.Disagg, dopts)
			if err != nil {
				if s.session != nil {
					s.session.Close()
				}
				s.closeAdmission()
				return nil, err
			}
			s.disagg, ropts.Profile = p, p
		}
		if s.session != nil {
			ropts.Profile = s.session.Profile(ropts.Profile) // around disagg's, when set
		}
		r, err := kvroute.New(ctx, cfg.Router, ropts)
		if err != nil {
			if s.session != nil {
				s.session.Close()
			}
			s.closeAdmission()
			return nil, err
		}
		s.router, picker = r, r
		if s.disagg != nil {
			s.disagg.SetEventsLive(disagg.RouterEventsLive(r))
		}
		s.session.Share(r.Cluster()) // nil-safe: no cluster, nothing shared
		if s.admission != nil {
			s.admission.SetLoad(r.Load())
			s.admission.ShareQueues(r.Cluster()) // nil without cluster sharing: nothing to share
		}
		if cfg.Proxy.Model == "" {
			cfg.Proxy.Model = cfg.Router.Model
		}
	case PolicyRoundRobin:
		if cfg.Session != nil {
			return nil, errors.New("gateway: session affinity needs the precise policy (it is one of the Router's scorers)")
		}
		if cfg.Models != nil {
			return nil, errors.New("gateway: models needs the precise policy (the Router chooses each model's endpoints)")
		}
		if cfg.Approximate != nil {
			return nil, errors.New("gateway: approximate needs the precise policy (it is the Router's index)")
		}
		if cfg.Admission != nil {
			return nil, errors.New("gateway: admission needs the precise policy (its accounting is the Router's)")
		}
		if cfg.Disagg != nil {
			return nil, errors.New("gateway: disagg needs the precise policy (its profile step is the Router's)")
		}
		if cfg.LoRA != nil {
			return nil, errors.New("gateway: the lora scorer needs the precise policy (it is one of the Router's scorers)")
		}
		if cfg.PeerLoadFromMetrics {
			return nil, errors.New("gateway: peerLoadFromMetrics needs the precise policy (it feeds the Router's load)")
		}
		picker = new(RoundRobin)
	default:
		return nil, fmt.Errorf("gateway: unknown policy %q (want %q or %q)", cfg.Policy, PolicyPrecise, PolicyRoundRobin)
	}
	ok := false
	defer func() {
		if !ok && s.router != nil {
			s.router.Close()
		}
		if !ok {
			s.closeAdmission()
		}
	}()
	h, err := New(cfg.Proxy, picker, Options{Set: telemetry.Set{Registerer: s.registry, Logger: logger, TracerProvider: opts.TracerProvider, Clock: opts.Clock}, Transport: opts.Transport})
	if err != nil {
		return nil, err
	}
	s.handler = h
	h.admission = s.admission
	if cfg.Disagg != nil && cfg.DisaggHost.Mode == DisaggModeExchange {
		// The prefill requests go over the gateway's own upstream
		// connections; the metrics are served with the gateway's.
		x, err := newExchangeState(cfg.DisaggHost.Exchange, s.registry, logger, h.transport)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("gateway: disagg exchange: %w", err)
		}
		h.exchanger = x
	}
	h.session = s.session
	if cfg.Models != nil {
		reg, err := models.New(*cfg.Models, models.Options{
			Set:      telemetry.Set{Registerer: s.registry, Logger: logger, Clock: opts.Clock},
			OnChange: s.reannotate,
		})
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("gateway: models: %w", err)
		}
		s.models, h.served = reg, reg
	}
	defer func() {
		if !ok && s.models != nil {
			s.models.Close()
		}
	}()
	s.cfg = cfg
	s.cfg.Proxy, s.cfg.Endpoints = h.cfg, nil
	if s.cfg.Policy == "" {
		s.cfg.Policy = PolicyPrecise
	}
	if len(cfg.Endpoints) > 0 {
		if err := s.SetEndpoints(cfg.Endpoints); err != nil {
			return nil, err
		}
	}
	for _, c := range []prometheus.Collector{s.headerTimeouts.HeaderTimeouts, s.headerTimeouts.Refused} {
		if err := s.registry.Register(c); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.mux(),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	wl := s.headerTimeouts.Install(s.srv, ln)
	if cfg.PeerLoadFromMetrics {
		s.peers = startPeerFeed(s.scraper, s.router, h.Endpoints, opts.Clk())
	}
	go func() {
		err := s.srv.Serve(wl)
		if !errors.Is(err, http.ErrServerClosed) {
			// Not Shutdown: the listener failed, and nothing is served any
			// more, /health and /ready included.
			logger.Error("gateway: serving failed; no connection is accepted any more", "listen", ln.Addr().String(), "err", err)
		}
		s.serveErr = err
		close(s.stopped)
	}()
	ok = true
	return s, nil
}

// mux routes /metrics, /health and everything else to the Handler, counting
// requests in flight so that Shutdown can wait for them. A request with a
// body gets Proxy.BodyReadTimeout as its read deadline before any handler
// answers: net/http discards the unread body of an answer (up to 256 KiB)
// before writing it, and a body that does not come by then fails the
// discard and closes the connection instead of holding it. The Handler's
// body read sets the deadline again and clears it after a complete body, so
// that it does not cut the response.
func (s *Server) mux() http.Handler {
	m := http.NewServeMux()
	m.Handle("/metrics", s.readOnly("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	})))
	m.Handle("/health", s.readOnly("/health", http.HandlerFunc(s.health)))
	m.Handle("/ready", s.readOnly("/ready", http.HandlerFunc(s.readyz)))
	m.Handle(StatusPath, s.readOnly(StatusPath, http.HandlerFunc(s.status)))
	m.Handle("/", s.handler)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handlers.Add(1)
		defer s.handlers.Done()
		if r.ContentLength != 0 {
			// A socket deadline, handed to the OS: wall time.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.handler.cfg.BodyReadTimeout))
		}
		m.ServeHTTP(w, r)
	})
}

// readOnly serves path (one of methodPaths) with next to GET and HEAD and
// answers any other method 405 with Allow (Handler.readOnly).
func (s *Server) readOnly(path string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.handler.readOnly(w, r, path) {
			next.ServeHTTP(w, r)
		}
	})
}

// health answers 200 while the gateway has endpoints and 503 otherwise.
func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	n := len(*s.handler.endpoints.Load())
	w.Header().Set("Content-Type", "application/json")
	if n == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintln(w, `{"status":"no endpoints","endpoints":0}`)
		return
	}
	_, _ = fmt.Fprintf(w, "{\"status\":\"ok\",\"endpoints\":%d}\n", n)
}

// SetEndpoints gives the router (event subscriptions, render endpoints) and
// the handler a new endpoint set. The handler takes it even when the router
// reports an error (which names what it could not set up).
func (s *Server) SetEndpoints(eps []kvroute.Endpoint) error {
	s.epMu.Lock()
	defer s.epMu.Unlock()
	return s.setEndpointsLocked(eps)
}

// setEndpointsLocked is SetEndpoints with epMu held.
func (s *Server) setEndpointsLocked(eps []kvroute.Endpoint) error {
	if s.models != nil {
		s.rawEp = slices.Clone(eps)
		s.models.SetEndpoints(eps)
		eps = s.models.Annotate(eps)
	}
	var err error
	if s.router != nil {
		err = s.router.SetEndpoints(eps)
	}
	s.handler.SetEndpoints(eps)
	if s.scraper != nil {
		s.scraper.SetEndpoints(eps)
	}
	return err
}

// reannotate hands the endpoints to the router and the handler again after
// the models poller saw an endpoint's models change. The endpoints are
// read and handed over under one hold of epMu: a SetEndpoints between the
// two would otherwise be undone, its replaced endpoints restored.
func (s *Server) reannotate() {
	s.epMu.Lock()
	defer s.epMu.Unlock()
	if err := s.setEndpointsLocked(s.rawEp); err != nil {
		s.log.Warn("gateway: endpoints after a change of served models", "err", err)
	}
}

// Done is closed once the Server has stopped serving: after Shutdown, or as
// soon as its listener fails on its own (Err says why), so that whatever
// runs the gateway can stop instead of staying up with nothing served. The
// failure is also logged at Error.
func (s *Server) Done() <-chan struct{} { return s.stopped }

// Err returns why the Server stopped serving: the listener's error when it
// failed on its own, nil after Shutdown or while it still serves.
func (s *Server) Err() error {
	select {
	case <-s.stopped:
		if errors.Is(s.serveErr, http.ErrServerClosed) {
			return nil
		}
		return s.serveErr
	default:
		return nil
	}
}

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL returns the server's base URL, e.g. "http://127.0.0.1:8080".
func (s *Server) URL() string { return "http://" + s.Addr() }

// Router returns the server's router; nil under PolicyRoundRobin.
func (s *Server) Router() *kvroute.Router { return s.router }

// Handler returns the server's proxy handler.
func (s *Server) Handler() *Handler { return s.handler }

// Registry returns the registry behind /metrics.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Drain begins a graceful stop without refusing anything: from now on, for
// good, /ready answers 503 with the reason "shutting down" and each
// connection is closed after the response it is serving (idle ones at
// once). A Kubernetes Service or load balancer that probes /ready stops
// sending new requests here, and a client on a persistent connection
// reconnects and lands on another replica, while every request that still
// arrives is served. Shutdown, later, stops accepting. A host calls Drain on
// SIGTERM and waits a drain window (kvroute-gateway's --drain-timeout)
// before Shutdown: a Service keeps sending a terminating pod traffic until
// its endpoints update, and without the window those requests are refused.
// Drain may be called more than once, concurrently with requests.
func (s *Server) Drain() {
	if s.draining.CompareAndSwap(false, true) {
		s.srv.SetKeepAlivesEnabled(false)
	}
}

// Shutdown stops the server gracefully: it stops accepting, waits for the
// requests in flight until ctx ends, then cuts the remaining connections
// (their requests see a cancelled context, so each Decision is Done), waits
// for every handler to return and closes the router. Later calls return the
// first call's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		// Requests still queued by the admission are answered 503 (closed,
		// with Retry-After) rather than holding the shutdown for their
		// queue timeouts.
		s.closeAdmission()
		if s.models != nil {
			s.models.Close() // its poller calls SetEndpoints: stopped before the router closes
		}
		err := s.srv.Shutdown(ctx)
		if err != nil {
			err = errors.Join(err, s.srv.Close())
		}
		<-s.stopped
		if serr := s.Err(); serr != nil {
			err = errors.Join(err, serr)
		}
		s.handlers.Wait()
		s.handler.Close()
		if s.router != nil {
			s.router.Close()
		}
		if s.session != nil {
			s.session.Close() // after the router: no pick records a session any more
		}
		s.shutdownErr = err
	})
	return s.shutdownErr
}

// closeAdmission closes the admission stage, the lora scorer and the
// engine scraper, those that exist.
func (s *Server) closeAdmission() {
	s.peers.close() // reads the scraper: stopped first
	if s.admission != nil {
		s.admission.Close()
	}
	if s.lora != nil {
		s.lora.Close()
	}
	if s.scraper != nil {
		s.scraper.Close()
	}
	if s.disagg != nil {
		s.disagg.Close()
	}
}

// Session returns the Server's session affinity, or nil without
// ServerConfig.Session.
func (s *Server) Session() *session.Affinity { return s.session }

// Admission returns the Server's admission stage, or nil without
// ServerConfig.Admission.
func (s *Server) Admission() *admission.Controller { return s.admission }
