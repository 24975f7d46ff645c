package session

import (
	"math"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/tokenload"
)

// scorer is the session-affinity scorer. For a request with a session key
// (Request.Session) whose last turn the store remembers, it gives the
// candidate that served that turn its headroom below
// Config.SaturationTokens (so does the candidate a session cookie names,
// CookieValue): 1 − (committed tokens + open requests ×
// Config.OpenRequestTokens + this request's uncached tokens) /
// SaturationTokens, 0 at or above it; every other candidate, and
// every candidate of a request without a session, gets 0.
//
// Weighed against the token-load scorer (the router's, weight
// Config.LoadWeight), the session's endpoint keeps the session while its
// total, load score plus Weight × headroom, beats the idlest other
// candidate's load score, and loses it when it is saturated: its session
// score is then 0 and the load decides alone. It is a preference, not a
// filter: the affinity filter and Options.Filters run first.
type scorer struct{ a *Affinity }

// Score rates candidate i of s. It does not allocate.
func (sc scorer) Score(s *kvroute.Selection, i int) float64 {
	key := s.Request().Session
	if key == "" {
		return 0
	}
	a := sc.a
	ep, ok := a.store.peek(Hash(key), a.now())
	if !ok && len(key)%4 != 0 {
		return 0 // not remembered, and no base64 value: it names no candidate
	}
	c := s.Candidate(i)
	if (!ok || c.Endpoint.ID != ep) && !names(key, c.Endpoint.ID) { // a cookie naming the candidate points at it
		return 0
	}
	load := max(c.InFlightTokens, 0)
	load += min(tokenload.OpenRequestLoad(c.OpenRequests, a.cfg.OpenRequestTokens), math.MaxInt64-load)
	return tokenload.Score(load, c.UncachedTokens, a.cfg.SaturationTokens)
}
