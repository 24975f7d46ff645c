package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/internal/connwatch"
	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/models"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/telemetry"
)

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
	if err := cfg.defaultTimeouts(); err != nil {
		return nil, err
	}
	s := &Server{registry: prometheus.NewRegistry(), log: logger, stopped: make(chan struct{}), headerTimeouts: newHeaderTimeouts()}
	if err := s.registerRuntimeMetrics(); err != nil {
		return nil, err
	}
	picker, err := s.buildPicker(ctx, &cfg, opts)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			s.closeBuilt()
		}
	}()
	h, err := s.buildHandler(cfg, picker, opts)
	if err != nil {
		return nil, err
	}
	if err := s.buildModels(cfg, opts); err != nil {
		return nil, err
	}
	s.keepConfig(cfg)
	if len(cfg.Endpoints) > 0 {
		if err := s.SetEndpoints(cfg.Endpoints); err != nil {
			return nil, err
		}
	}
	if err := s.registerConnMetrics(); err != nil {
		return nil, err
	}
	wl, err := s.listen(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.PeerLoadFromMetrics {
		s.peers = startPeerFeed(s.scraper, s.router, h.Endpoints, opts.Clk())
	}
	go s.serve(wl)
	ok = true
	return s, nil
}

// defaultTimeouts rejects negative client connection timeouts and gives
// the zero ones their defaults.
func (cfg *ServerConfig) defaultTimeouts() error {
	switch {
	case cfg.ReadHeaderTimeout < 0:
		return fmt.Errorf("gateway: readHeaderTimeout %v is negative", cfg.ReadHeaderTimeout)
	case cfg.ReadHeaderTimeout == 0:
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	switch {
	case cfg.IdleTimeout < 0:
		return fmt.Errorf("gateway: idleTimeout %v is negative", cfg.IdleTimeout)
	case cfg.IdleTimeout == 0:
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	return nil
}

// registerRuntimeMetrics registers the Go runtime's and the process's
// metrics, first in the registry /metrics serves.
func (s *Server) registerRuntimeMetrics() error {
	if err := s.registry.Register(collectors.NewGoCollector()); err != nil {
		return err
	}
	return s.registry.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// closeBuilt closes what NewServer built before it failed: the models
// poller, the Handler (its transport and metrics), the router, the
// components closeAdmission closes and the session affinity.
func (s *Server) closeBuilt() {
	if s.models != nil {
		s.models.Close()
	}
	if s.handler != nil {
		s.handler.Close()
	}
	if s.router != nil {
		s.router.Close()
	}
	s.closeAdmission()
	if s.session != nil {
		s.session.Close()
	}
}

// buildHandler builds the Handler around picker, with the admission
// stage, the exchange mode of disaggHost and the session affinity built
// before it. A failure closes the Handler it built.
func (s *Server) buildHandler(cfg ServerConfig, picker kvroute.Picker, opts Options) (*Handler, error) {
	h, err := New(cfg.Proxy, picker, Options{Set: telemetry.Set{Registerer: s.registry, Logger: s.log, TracerProvider: opts.TracerProvider, Clock: opts.Clock}, Transport: opts.Transport})
	if err != nil {
		return nil, err
	}
	h.admission = s.admission
	if cfg.Disagg != nil && cfg.DisaggHost.Mode == DisaggModeExchange {
		// The prefill requests go over the gateway's own upstream
		// connections; the metrics are served with the gateway's. A
		// body over the prefill step's limit goes to no prefiller (the
		// decode endpoint prefills it, fallback body_too_large): unset,
		// that limit is at least the gateway's own, so that every body
		// the gateway takes may be split.
		xcfg := cfg.DisaggHost.Exchange
		if xcfg.MaxBodyBytes == 0 {
			xcfg.MaxBodyBytes = max(sidecar.DefaultMaxBodyBytes, h.cfg.MaxBodyBytes)
		}
		x, err := newExchangeState(xcfg, s.registry, s.log, h.transport)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("gateway: disagg exchange: %w", err)
		}
		h.exchanger = x
	}
	h.session = s.session
	s.handler = h // closed by closeBuilt from here on
	return h, nil
}

// buildModels builds the models registry of cfg.Models, when set, and
// gives it to the Handler. On a failure NewServer closes the Handler
// with the rest (closeBuilt).
func (s *Server) buildModels(cfg ServerConfig, opts Options) error {
	if cfg.Models == nil {
		return nil
	}
	reg, err := models.New(*cfg.Models, models.Options{
		Set:      telemetry.Set{Registerer: s.registry, Logger: s.log, Clock: opts.Clock},
		OnChange: s.reannotate,
	})
	if err != nil {
		return fmt.Errorf("gateway: models: %w", err)
	}
	s.models, s.handler.served = reg, reg
	return nil
}

// keepConfig keeps cfg as served, for the status page: the Handler's
// configuration with its defaults, no endpoints (SetEndpoints keeps
// those) and the policy named.
func (s *Server) keepConfig(cfg ServerConfig) {
	s.cfg = cfg
	s.cfg.Proxy, s.cfg.Endpoints = s.handler.cfg, nil
	if s.cfg.Policy == "" {
		s.cfg.Policy = PolicyPrecise
	}
}

// registerConnMetrics registers the counters of the client connections
// net/http closes or refuses silently.
func (s *Server) registerConnMetrics() error {
	for _, c := range []prometheus.Collector{s.headerTimeouts.HeaderTimeouts, s.headerTimeouts.Refused} {
		if err := s.registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// listen listens on cfg.Listen and builds the http.Server, and returns
// the listener to serve, watched for header timeouts and refusals.
func (s *Server) listen(cfg ServerConfig) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.mux(),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	return s.headerTimeouts.Install(s.srv, ln), nil
}

// serve runs srv.Serve on wl, on the goroutine NewServer starts, and
// records its result (Err) and its end (Done).
func (s *Server) serve(wl net.Listener) {
	err := s.srv.Serve(wl)
	if !errors.Is(err, http.ErrServerClosed) {
		// Not Shutdown: the listener failed, and nothing is served any
		// more, /health and /ready included.
		s.log.Error("gateway: serving failed; no connection is accepted any more", "listen", s.ln.Addr().String(), "err", err)
	}
	s.serveErr = err
	close(s.stopped)
}
