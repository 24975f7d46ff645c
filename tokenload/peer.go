package tokenload

import "sync/atomic"

// peerCounters is the load other router replicas reported for one endpoint:
// their last published totals, replaced as a whole on every read of the
// shared state, never incremented here.
type peerCounters struct {
	tokens   atomic.Int64
	requests atomic.Int64
}

// PeerLoad is the in-flight load other router replicas carry on one
// endpoint, summed over the live replicas.
type PeerLoad struct {
	Tokens   int64
	Requests int64
}

// Add returns p plus a change of tokens and requests (negative releases),
// each sum saturating at the int64 range instead of wrapping, as
// AddPeerLoad's does. A component that sums several replicas' loads before
// SetPeerLoads uses it: the loads come from the peers, and a wrapped,
// negative sum would count as no load and make the most loaded endpoint
// look idle.
func (p PeerLoad) Add(tokens, requests int64) PeerLoad {
	return PeerLoad{Tokens: saturatingAdd(p.Tokens, tokens), Requests: saturatingAdd(p.Requests, requests)}
}

// SetPeerLoads replaces the load the other router replicas carry: Load then
// reports this process's own load plus loads[endpoint]; endpoints absent
// from loads carry no peer load any more. nil clears every peer load (the
// shared state is unreachable: route on local load only). Negative values
// count as 0. It is called off the request path, by the component that reads
// the replicas' shared state; Dispatch, Load and the handles never wait for
// it. Endpoints with peer load but no local dispatch get counters, so a peer
// set bounded in endpoints bounds the tracker too.
func (t *Tracker) SetPeerLoads(loads map[string]PeerLoad) {
	t.endpoints.Range(func(ep string, c *counters) bool {
		if _, ok := loads[ep]; !ok {
			c.peer.tokens.Store(0)
			c.peer.requests.Store(0)
		}
		return true
	})
	for ep, l := range loads {
		tok, req := max(l.Tokens, 0), max(l.Requests, 0)
		if tok == 0 && req == 0 {
			if c, ok := t.endpoints.Load(ep); ok {
				c.peer.tokens.Store(0)
				c.peer.requests.Store(0)
			}
			continue
		}
		c := t.counters(ep)
		c.peer.tokens.Store(tok)
		c.peer.requests.Store(req)
	}
}

// LocalLoad returns the endpoint's in-flight load dispatched by this process
// alone (Load minus the peers' share).
func (t *Tracker) LocalLoad(endpoint string) (tokens, requests int64) {
	c, ok := t.endpoints.Load(endpoint)
	if !ok {
		return 0, 0
	}
	return c.tokens.Load(), c.requests.Load()
}

// PeerLoadOf returns the load the other replicas last reported for the
// endpoint.
func (t *Tracker) PeerLoadOf(endpoint string) PeerLoad {
	c, ok := t.endpoints.Load(endpoint)
	if !ok {
		return PeerLoad{}
	}
	return PeerLoad{Tokens: max(c.peer.tokens.Load(), 0), Requests: max(c.peer.requests.Load(), 0)}
}
