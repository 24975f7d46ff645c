package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/enginemetrics"
	"github.com/kvroute/kvroute/telemetry"
)

// buildPicker builds the picker of cfg.Policy: under PolicyPrecise the
// Router and the components around it (buildRouter), under
// PolicyRoundRobin a RoundRobin once no option needs the Router.
func (s *Server) buildPicker(ctx context.Context, cfg *ServerConfig, opts Options) (kvroute.Picker, error) {
	switch cfg.Policy {
	case "", PolicyPrecise:
		if err := s.buildRouter(ctx, cfg, opts); err != nil {
			return nil, err
		}
		return s.router, nil
	case PolicyRoundRobin:
		if err := checkRoundRobin(*cfg); err != nil {
			return nil, err
		}
		return new(RoundRobin), nil
	default:
		return nil, fmt.Errorf("gateway: unknown policy %q (want %q or %q)", cfg.Policy, PolicyPrecise, PolicyRoundRobin)
	}
}

// buildRouter builds the Router (s.router) and the components it runs
// with, wires them to it and defaults cfg.Proxy.Model to the Router's
// model. ctx bounds kvroute.New. A failure closes what it built.
func (s *Server) buildRouter(ctx context.Context, cfg *ServerConfig, opts Options) error {
	ropts := kvroute.Options{Set: telemetry.Set{Registerer: s.registry, Logger: s.log, TracerProvider: opts.TracerProvider, Clock: opts.Clock}}
	acfg, capacities, err := checkPrecise(*cfg)
	if err != nil {
		return err
	}
	if err := s.buildScraper(*cfg, capacities, ropts.Set); err != nil {
		return err
	}
	if err := s.buildComponents(*cfg, acfg, capacities, opts, &ropts); err != nil {
		s.closeComponents()
		return err
	}
	r, err := kvroute.New(ctx, cfg.Router, ropts)
	if err != nil {
		s.closeComponents()
		return err
	}
	if err := s.wireRouter(r); err != nil {
		r.Close()
		s.closeComponents()
		return err
	}
	if cfg.Proxy.Model == "" {
		cfg.Proxy.Model = cfg.Router.Model
	}
	return nil
}

// checkPrecise checks the options of the precise policy that need one
// another, and returns the approximate index's configuration and whether
// its capacities come from the engines' metrics.
func checkPrecise(cfg ServerConfig) (acfg approx.Config, capacities bool, err error) {
	if cfg.Approximate != nil {
		acfg = *cfg.Approximate
	}
	if err := acfg.Validate(); err != nil {
		return acfg, false, fmt.Errorf("gateway: approximate: %w", err)
	}
	capacities = acfg.Enabled && acfg.CapacityFrom != approx.CapacityFromConfig
	if cfg.EngineMetrics != nil && cfg.Admission == nil && cfg.LoRA == nil && !capacities && !cfg.PeerLoadFromMetrics {
		return acfg, false, errors.New("gateway: engineMetrics feeds the admission stage, the lora scorer, the approximate index's capacities and peerLoadFromMetrics; set admission, lora, approximate.enabled or peerLoadFromMetrics too")
	}
	if cfg.PeerLoadFromMetrics && cfg.Router.Cluster.Enabled() {
		return acfg, false, errors.New("gateway: peerLoadFromMetrics estimates what a cluster shares exactly; set one or the other")
	}
	return acfg, capacities, nil
}

// buildScraper builds the engine metrics scraper (s.scraper) when a
// component reads it.
func (s *Server) buildScraper(cfg ServerConfig, capacities bool, set telemetry.Set) error {
	if cfg.EngineMetrics == nil && cfg.LoRA == nil && !capacities && !cfg.PeerLoadFromMetrics {
		return nil
	}
	var emc enginemetrics.Config
	switch {
	case cfg.EngineMetrics != nil:
		emc = *cfg.EngineMetrics
	case cfg.LoRA == nil && cfg.Admission == nil && !cfg.PeerLoadFromMetrics:
		// Only the capacities read it, and they change when an
		// engine restarts: no need to scrape every 50ms.
		emc = enginemetrics.Config{Interval: CapacityScrapeInterval, Staleness: 3 * CapacityScrapeInterval}
	}
	sc, err := enginemetrics.New(emc, enginemetrics.Options{Set: set})
	if err != nil {
		return err
	}
	s.scraper = sc
	return nil
}

// wireRouter gives the components built before the Router what they read
// from it: its events, its cluster and its load.
func (s *Server) wireRouter(r *kvroute.Router) error {
	s.router = r
	if s.disagg != nil {
		s.disagg.SetEventsLive(disagg.RouterEventsLive(r))
	}
	if err := s.session.Share(r.Cluster()); err != nil { // nil-safe: no cluster, nothing shared
		return fmt.Errorf("gateway: session: %w", err)
	}
	if s.admission != nil {
		s.admission.SetLoad(r.Load())
		if err := s.admission.ShareQueues(r.Cluster()); err != nil { // nil without cluster sharing: nothing to share
			return fmt.Errorf("gateway: admission: %w", err)
		}
	}
	return nil
}

// checkRoundRobin rejects the options PolicyRoundRobin cannot serve: each
// needs the Router.
func checkRoundRobin(cfg ServerConfig) error {
	switch {
	case cfg.Session != nil:
		return errors.New("gateway: session affinity needs the precise policy (it is one of the Router's scorers)")
	case cfg.Models != nil:
		return errors.New("gateway: models needs the precise policy (the Router chooses each model's endpoints)")
	case cfg.Approximate != nil:
		return errors.New("gateway: approximate needs the precise policy (it is the Router's index)")
	case cfg.Admission != nil:
		return errors.New("gateway: admission needs the precise policy (its accounting is the Router's)")
	case cfg.Disagg != nil:
		return errors.New("gateway: disagg needs the precise policy (its profile step is the Router's)")
	case cfg.LoRA != nil:
		return errors.New("gateway: the lora scorer needs the precise policy (it is one of the Router's scorers)")
	case cfg.PeerLoadFromMetrics:
		return errors.New("gateway: peerLoadFromMetrics needs the precise policy (it feeds the Router's load)")
	}
	return nil
}
