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
	}
	body := struct {
		Ready     bool       `json:"ready"`
		Reason    string     `json:"reason,omitempty"`
		Endpoints []endpoint `json:"endpoints,omitempty"`
	}{Ready: true}
	switch {
	case len(*s.handler.endpoints.Load()) == 0:
		body.Ready, body.Reason = false, "no endpoints"
	case s.router != nil:
		for _, e := range s.router.Readiness() {
			body.Endpoints = append(body.Endpoints, endpoint{ID: e.ID, State: string(e.State), GivenUp: e.GivenUp})
		}
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
