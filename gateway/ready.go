package gateway

import (
	"encoding/json"
	"net/http"
)

// readyz answers /ready: 200 when the gateway has endpoints and its router's
// index has converged (kvroute.Router.Ready: every endpoint's KV-event
// stream live or given up on), 503 otherwise with the reason. /health only
// says the process serves; /ready is what a Kubernetes readiness probe should
// ask, so a replica that has not caught up receives no traffic.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	type endpoint struct {
		ID      string `json:"id"`
		State   string `json:"state"`
		GivenUp bool   `json:"givenUp,omitempty"`
		Mode    string `json:"mode,omitempty"` // precise, approximate or blind
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
	}{Ready: true}
	switch {
	case len(*s.handler.endpoints.Load()) == 0:
		body.Ready, body.Reason = false, "no endpoints"
	case s.router != nil:
		modes := s.endpointModes()
		seen := map[string]bool{}
		for _, e := range s.router.Readiness() {
			body.Endpoints = append(body.Endpoints, endpoint{ID: e.ID, State: string(e.State), GivenUp: e.GivenUp, Mode: modes[e.ID].Mode.String()})
			seen[e.ID] = true
		}
		for _, e := range *s.handler.endpoints.Load() {
			if !seen[e.ID] {
				body.Endpoints = append(body.Endpoints, endpoint{ID: e.ID, State: "no events", Mode: modes[e.ID].Mode.String()})
			}
		}
		body.CacheModes, body.ModeWarning = modeSummary(modes)
		if reason := s.router.NotReady(); reason != "" {
			body.Ready, body.Reason = false, reason
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if !body.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}
