package sim

import (
	"time"

	"github.com/kvroute/kvroute/tokenload"
)

// SharedExact switches off parts of the shared state's propagation, to
// measure what each part costs (the replica decomposition); a deployment
// has none of these. The zero value is the modelled pool.
type SharedExact struct {
	// Load: before every Pick the picking replica's view of its peers' load
	// is their exact local load at that instant, as if every load change
	// reached it at once; decisions still travel with their delays.
	Load bool `json:"load,omitempty"`
	// All: every decision and load change is flushed and applied on the
	// other replicas the moment it is made (R replicas then decide exactly
	// as one router).
	All bool `json:"all,omitempty"`
}

// String names the mode for reports.
func (e SharedExact) String() string {
	switch {
	case e.All:
		return "decisions and load exact"
	case e.Load:
		return "load exact"
	}
	return "modelled"
}

// beforePick gives replica g the exact peer load when SharedExact.Load is
// set: the sum of the other replicas' local load per endpoint.
func (p *sharedPool) beforePick(r *run, g int) {
	if p == nil || !p.cfg.Exact.Load {
		return
	}
	loads := map[string]tokenload.PeerLoad{}
	for h, rt := range r.rts {
		if h == g {
			continue
		}
		rt.(*kvrouter).r.Load().Range(func(ep string, tokens, requests int64) bool {
			l := loads[ep]
			l.Tokens += tokens
			l.Requests += requests
			loads[ep] = l
			return true
		})
	}
	r.rts[g].(*kvrouter).r.Load().SetPeerLoads(loads)
}

// instant, when SharedExact.All is set, flushes every replica's queued
// decisions and load changes and applies them on the others at once.
func (p *sharedPool) instant(now time.Time) {
	if p == nil || !p.cfg.Exact.All {
		return
	}
	p.syncAll(now)
}

// syncAll flushes every queued decision and load change and applies the
// messages on every replica.
func (p *sharedPool) syncAll(now time.Time) {
	for g, m := range p.reps {
		if m.Queued() > 0 {
			m.Flush()
			p.flush[g], p.flushed[g] = time.Time{}, now
		}
	}
	for _, msg := range p.store.deliverAll() {
		for _, m := range p.reps {
			m.Apply(msg)
		}
	}
}
