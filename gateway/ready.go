package gateway

import (
	"encoding/json"
	"net/http"

	"github.com/kvroute/kvroute/approx"
)

// ReasonShuttingDown is /ready's reason once Server.Drain has run: the
// gateway still serves, but a probe should take it out of rotation.
const ReasonShuttingDown = "shutting down"

// notReady is why the gateway should receive no traffic, "" when it
// should: it is draining (Server.Drain), it has no endpoints, or its
// router's index has not converged. /ready and the status page both report
// it, so they never disagree.
func (s *Server) notReady() string {
	switch {
	case s.draining.Load():
		return ReasonShuttingDown
	case len(*s.handler.endpoints.Load()) == 0:
		return "no endpoints"
	case s.router != nil:
		return s.router.NotReady()
	}
	return ""
}

// readyz answers /ready: 200 when the gateway has endpoints and its router's
// index has converged (kvroute.Router.Ready: every endpoint's KV-event
// stream live or given up on), 503 otherwise with the reason. /health only
// says the process serves; /ready is what a Kubernetes readiness probe should
// ask, so a replica that has not caught up receives no traffic, nor one that
// is draining (Server.Drain).
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	type endpoint struct {
		ID      string `json:"id"`
		State   string `json:"state"`
		GivenUp bool   `json:"givenUp,omitempty"`
		Mode    string `json:"mode,omitempty"` // precise, approximate or blind
		// Capacity is the approximate index's capacity in the router's
		// blocks, CapacitySource where it came from (engine, config,
		// default, ...) and CapacityFallback why it is not the engine's
		// own; set only while the index is enabled.
		Capacity         int    `json:"capacity,omitempty"`
		CapacitySource   string `json:"capacitySource,omitempty"`
		CapacityFallback string `json:"capacityFallback,omitempty"`
	}
	enabled := s.approx != nil && s.approx.Enabled()
	withCapacity := func(e endpoint, m approx.EndpointState) endpoint {
		e.Mode = m.Mode.String()
		if enabled {
			e.Capacity, e.CapacitySource, e.CapacityFallback = m.Capacity, m.CapacitySource, fallbackText(m)
		}
		return e
	}
	body := struct {
		Ready     bool       `json:"ready"`
		Reason    string     `json:"reason,omitempty"`
		Endpoints []endpoint `json:"endpoints,omitempty"`
		// CacheModes counts the endpoints by cache mode and ModeWarning
		// says when one is not precise (readiness does not wait for it: an
		// engine without events is routed approximately or blind for good).
		CacheModes  string `json:"cacheModes,omitempty"`
		ModeWarning string `json:"modeWarning,omitempty"`
		// CapacityWarning names the endpoints whose approximate index is
		// not sized to their engine's own capacity (readiness does not
		// wait for it either).
		CapacityWarning string `json:"capacityWarning,omitempty"`
	}{}
	body.Reason = s.notReady()
	body.Ready = body.Reason == ""
	if s.router != nil && len(*s.handler.endpoints.Load()) > 0 {
		modes := s.endpointModes()
		seen := map[string]bool{}
		for _, e := range s.router.Readiness() {
			body.Endpoints = append(body.Endpoints, withCapacity(endpoint{ID: e.ID, State: string(e.State), GivenUp: e.GivenUp}, modes[e.ID]))
			seen[e.ID] = true
		}
		for _, e := range *s.handler.endpoints.Load() {
			if !seen[e.ID] {
				body.Endpoints = append(body.Endpoints, withCapacity(endpoint{ID: e.ID, State: "no events"}, modes[e.ID]))
			}
		}
		body.CacheModes, body.ModeWarning = modeSummary(modes)
		body.CapacityWarning = capacityWarning(modes)
	}
	w.Header().Set("Content-Type", "application/json")
	if !body.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}
