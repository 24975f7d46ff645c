package gateway

import (
	"slices"

	"github.com/kvroute/kvroute"
)

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
