package extproc

import (
	"context"
	"time"
)

// ReadinessSource says whether the index a picker routes by has converged.
// *kvroute.Router implements it: NotReady is "" once every endpoint's
// KV-event stream is live (caught up and connected) or has been given up on,
// and otherwise says which endpoints it still waits for.
type ReadinessSource interface {
	NotReady() string
}

// DefaultReadinessInterval is how often FollowReadiness asks its source when
// given no interval: well inside a Kubernetes readiness probe's period.
const DefaultReadinessInterval = time.Second

// FollowReadiness keeps the health service's readiness (readiness, the
// ext_proc service name and "") in step with src until ctx ends: ready when
// the Server has at least one endpoint and src reports no reason to wait, the
// rule the kvroute gateway's /ready applies. Without endpoints the reason
// is "no endpoints", followed by src's when it gives one (why discovery
// found none). A picker that routes before its
// index has caught up sends every request to the wrong, cold endpoint, so
// Envoy should not be told to use it until then.
//
// It asks at once and then every interval on the Options' clock (0 means
// DefaultReadinessInterval); asking also runs a kvroute.Router's give-up
// clocks. Each change is logged with its reason, and ReadyPath gives src's
// latest reason while the picker is not ready (a host's own, such as a
// standby replica's, when its router has caught up). It blocks until ctx is
// done, so run it on a goroutine of its own; while it runs, do not call
// SetReady. After Shutdown it changes nothing: the picker stays not ready
// and ReadyPath says it is shutting down.
func (s *Server) FollowReadiness(ctx context.Context, src ReadinessSource, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultReadinessInterval
	}
	t := s.clock.NewTicker(interval) // the Options' clock
	defer t.Stop()
	first := true
	for {
		reason := s.notReady(src)
		s.reason.Store(&reason) // ReadyPath's reason
		// After Shutdown readiness stays false: nothing to set or log.
		if ready := reason == ""; !s.down.Load() && (first || ready != s.ready.Load()) {
			s.SetReady(ready)
			if ready {
				s.log.Info("extproc: ready", "endpoints", len(*s.endpoints.Load()))
			} else {
				s.log.Info("extproc: not ready", "reason", reason)
			}
			first = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// noEndpoints is the reason the picker is not ready without endpoints;
// notReady adds its source's reason, when it has one, after a colon.
const noEndpoints = "no endpoints"

// notReady returns why the picker should not receive traffic ("" when it
// should). Without endpoints, src's reason says why when it has one (a
// host's endpoint discovery: its InferencePool's CRD not installed, the
// pool missing or being deleted).
func (s *Server) notReady(src ReadinessSource) string {
	reason := src.NotReady()
	if len(*s.endpoints.Load()) == 0 {
		if reason != "" {
			return noEndpoints + ": " + reason
		}
		return noEndpoints
	}
	return reason
}
