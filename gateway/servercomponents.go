package gateway

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/lora"
	"github.com/kvroute/kvroute/session"
	"github.com/kvroute/kvroute/telemetry"
)

// buildComponents builds, in order, the approximate index, the lora
// scorer, the admission stage, the session affinity and the disagg
// profile that cfg sets, and puts them in ropts. It leaves closing what it
// built on failure to the caller (closeComponents).
func (s *Server) buildComponents(cfg ServerConfig, acfg approx.Config, capacities bool, opts Options, ropts *kvroute.Options) error {
	if err := s.buildApprox(acfg, capacities, opts, ropts); err != nil {
		return err
	}
	if err := s.buildLoRA(cfg, ropts); err != nil {
		return err
	}
	if err := s.buildAdmission(cfg, ropts); err != nil {
		return err
	}
	if err := checkDisaggHost(cfg); err != nil {
		return err
	}
	if err := s.buildSession(cfg, ropts); err != nil {
		return err
	}
	if err := s.buildDisagg(cfg, ropts); err != nil {
		return err
	}
	if s.session != nil {
		ropts.Profile = s.session.Profile(ropts.Profile) // around disagg's, when set
	}
	return nil
}

// closeComponents closes what buildScraper and buildComponents built: the
// session affinity, then closeAdmission's components.
func (s *Server) closeComponents() {
	if s.session != nil {
		s.session.Close()
	}
	s.closeAdmission()
}

// buildApprox builds the Router's approximate index and mode table
// (s.approx), its capacities read from the scraper when they come from
// the engines' metrics.
func (s *Server) buildApprox(acfg approx.Config, capacities bool, opts Options, ropts *kvroute.Options) error {
	aopts := approx.Options{Set: telemetry.Set{Registerer: s.registry, Logger: s.log, Clock: opts.Clock}}
	if capacities {
		aopts.Capacities = scraperCapacities{s.scraper}
	}
	ix, err := approx.New(acfg, aopts)
	if err != nil {
		return fmt.Errorf("gateway: approximate: %w", err)
	}
	s.approx, ropts.Approximate = ix, ix
	return nil
}

// buildLoRA builds the lora scorer of cfg.LoRA (s.lora), when set, one of
// the Router's scorers.
func (s *Server) buildLoRA(cfg ServerConfig, ropts *kvroute.Options) error {
	if cfg.LoRA == nil {
		return nil
	}
	ls, err := lora.New(*cfg.LoRA, s.scraper, lora.Options{Set: ropts.Set})
	if err != nil {
		return err
	}
	s.lora = ls
	ropts.Scorers = append(ropts.Scorers, ls.Weighted())
	return nil
}

// buildAdmission builds the admission stage of cfg.Admission
// (s.admission), when set, with the scraper as a detector and as the
// dispatch gate's headroom when cfg.EngineMetrics is set.
func (s *Server) buildAdmission(cfg ServerConfig, ropts *kvroute.Options) error {
	if cfg.Admission == nil {
		return nil
	}
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
		return err
	}
	s.admission, ropts.Admission = a, a
	return nil
}

// checkDisaggHost checks cfg.DisaggHost, alone and against cfg.Disagg.
func checkDisaggHost(cfg ServerConfig) error {
	if err := cfg.DisaggHost.Validate(); err != nil {
		return err
	}
	if cfg.Disagg == nil && cfg.DisaggHost != (DisaggHostConfig{}) {
		return errors.New("gateway: disaggHost is set without disagg")
	}
	if cfg.Disagg != nil {
		return cfg.DisaggHost.ValidateFor(*cfg.Disagg)
	}
	return nil
}

// buildSession builds the session affinity of cfg.Session (s.session),
// when set, one of the Router's scorers.
func (s *Server) buildSession(cfg ServerConfig, ropts *kvroute.Options) error {
	if cfg.Session == nil {
		return nil
	}
	aff, err := session.New(*cfg.Session, session.Options{Set: ropts.Set})
	if err != nil {
		return err
	}
	s.session = aff
	ropts.Scorers = append(ropts.Scorers, aff.Scorer())
	return nil
}

// buildDisagg builds the disagg profile of cfg.Disagg (s.disagg), when
// set, the Router's profile step.
func (s *Server) buildDisagg(cfg ServerConfig, ropts *kvroute.Options) error {
	if cfg.Disagg == nil {
		return nil
	}
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
		return err
	}
	s.disagg, ropts.Profile = p, p
	return nil
}
