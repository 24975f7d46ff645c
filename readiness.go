package kvroute

import (
	"fmt"
	"time"

	"github.com/kvroute/kvroute/kvevents"
)

// ReadinessConfig configures Router.Ready.
type ReadinessConfig struct {
	// GiveUpAfter is how long an endpoint's stream may stay out of the live
	// state (connecting, replaying or degraded) before Ready stops waiting
	// for it; the endpoint is then reported as given up (and routed by
	// whatever the index holds). A duration string such as "2m"; default 2
	// minutes; negative waits forever.
	GiveUpAfter time.Duration `json:"giveUpAfter"`
}

// DefaultGiveUpAfter is ReadinessConfig.GiveUpAfter's default.
const DefaultGiveUpAfter = 2 * time.Minute

// EndpointReadiness is one endpoint's part in Router.Ready.
type EndpointReadiness struct {
	ID string
	// State is the endpoint's KV-event stream state.
	State kvevents.StreamState
	// Since is when the endpoint's stream entered State, as the event pool
	// recorded it (on the router's clock).
	Since time.Time
	// GivenUp reports that the stream has not been live for longer than
	// ReadinessConfig.GiveUpAfter: Ready no longer waits for it.
	GivenUp bool
	// LastApplied is when the endpoint's last batch was applied (zero:
	// never).
	LastApplied time.Time
	// Status is the pool's full status of the endpoint.
	Status kvevents.EndpointStatus
}

// readiness is Router.Ready's configuration.
type readiness struct {
	giveUp time.Duration
}

// Readiness returns every subscribed endpoint's stream state, sorted by ID;
// nil when KV events are disabled.
func (r *Router) Readiness() []EndpointReadiness {
	if r.events == nil {
		return nil
	}
	now := r.now()
	// One view of the endpoint set (sorted by ID): while SetEndpoints
	// replaces an endpoint, listing the IDs and then reading each could
	// miss both the old stream (removed in between) and the new one (added
	// in between), and an empty set reads as ready.
	sts := r.events.eventPool().Statuses()
	out := make([]EndpointReadiness, 0, len(sts))
	for _, st := range sts {
		er := EndpointReadiness{ID: st.ID, State: st.State, Since: st.Since, LastApplied: st.LastApplied, Status: st}
		er.GivenUp = st.State != kvevents.StateLive && r.ready.giveUp >= 0 && now.Sub(st.Since) >= r.ready.giveUp
		out = append(out, er)
	}
	return out
}

// Ready reports whether the index has converged: every subscribed
// endpoint's KV-event stream is live (caught up and connected) or has been
// given up on (Config.Readiness.GiveUpAfter, counted from when the stream
// entered its current state). A router without KV events is always ready;
// one whose endpoints have not been set is not.
func (r *Router) Ready() bool {
	if r.events == nil {
		return true
	}
	if r.needsEndpoints.Load() && !r.endpointsSet.Load() {
		return false
	}
	for _, e := range r.Readiness() {
		if e.State != kvevents.StateLive && !e.GivenUp {
			return false
		}
	}
	return true
}

// NotReady returns a one-line reason why Ready is false ("" when ready),
// for a readiness endpoint's body.
func (r *Router) NotReady() string {
	if r.events == nil {
		return ""
	}
	if r.needsEndpoints.Load() && !r.endpointsSet.Load() {
		return "endpoints not set"
	}
	var waiting []string
	for _, e := range r.Readiness() {
		if e.State != kvevents.StateLive && !e.GivenUp {
			waiting = append(waiting, fmt.Sprintf("%s %s for %s", e.ID, e.State, r.now().Sub(e.Since).Round(time.Second)))
		}
	}
	if len(waiting) == 0 {
		return ""
	}
	return fmt.Sprintf("%d endpoint(s) not live: %v", len(waiting), waiting)
}
