package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/admission"
	"github.com/kvroute/kvroute/session"
)

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

// Session returns the Server's session affinity, or nil without
// ServerConfig.Session.
func (s *Server) Session() *session.Affinity { return s.session }

// Admission returns the Server's admission stage, or nil without
// ServerConfig.Admission.
func (s *Server) Admission() *admission.Controller { return s.admission }
