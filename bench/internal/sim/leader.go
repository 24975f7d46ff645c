package sim

import (
	"time"
)

// One picker for every replica (SharedState.LeaderRTT), an experiment on
// the replica target: instead of R replicas each picking with a view of
// their peers' load that lags by a round trip, every replica forwards its
// requests to replica 0, which picks for all with its own load view (its
// dispatches exact, the forwarded requests' first chunks and ends half a
// round trip late). It shows whether a design that removes the lag from
// the picks gets closer to one router than shared state does; package
// cluster does not implement it.

// forward sends a request that reached replica g to the leader when
// SharedState.LeaderRTT is on, and reports whether it did: the request
// arrives again one LeaderRTT later, to be picked by replica 0.
func (r *run) forward(a arrival, g int) bool {
	if r.cfg.SharedState == nil || r.cfg.SharedState.LeaderRTT <= 0 || a.forwardedFrom > 0 || g == 0 {
		return false
	}
	a.forwardedFrom = g + 1
	a.at = r.now.Add(r.cfg.SharedState.LeaderRTT)
	r.push(a)
	return true
}

// reportChange applies a request's load change (apply, its first chunk or
// end on its replica's Router) and queues it for the peers; a request the
// leader picked for another replica reaches it half a LeaderRTT later.
func (r *run) reportChange(rq *request, apply func()) {
	if rq.forwardedFrom > 0 && !r.cfg.SharedState.LeaderChangesInstant {
		r.after(r.cfg.SharedState.LeaderRTT/2, func() { apply(); r.changed(rq) })
		return
	}
	apply()
	r.changed(rq)
}

// after runs fn d from now, in the loop's pass for that time before the
// arrivals due then.
func (r *run) after(d time.Duration, fn func()) {
	r.later.push(r.now.Add(d), fn)
}
