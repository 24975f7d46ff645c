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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

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
