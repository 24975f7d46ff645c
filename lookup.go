package kvroute

import (
	"unsafe"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/tokenload"
)

// lookup is the index-lookup stage: each prompt's longest cached prefix on
// every candidate, summed over prompts, then each candidate's projected
// uncached tokens and in-flight load (tokens and open requests).
//
// Its per-candidate work is what the index hands back, summed in one pass
// (MatchResult.AddTo), then one pass for the rest: a read of the
// candidate's load counters (resolved once per candidate list, not hashed
// per request: tokenload.LoadView; the list compared once, here); the
// uncached tokens, the request's own terms computed once
// (tokenload.Uncached), are projected on the candidates that need them.
// This is the one place the candidates' load is read, so load reported by
// peer routers joins here (local + peers', as Tracker.Load gives it).
func (s *Selection) lookup() {
	r, st := s.r, &s.st
	eps := s.eps
	st.ids = grow(st.ids, len(eps))
	ids := st.ids[:len(eps)] // read once: a store to it would otherwise reload both lists
	same := true             // st.ids is the list the load view last read
	for i := range eps {
		// Written only when it changed: a host passes the same candidates
		// request after request.
		if id := eps[i].ID; unsafe.StringData(ids[i]) != unsafe.StringData(id) || len(ids[i]) != len(id) {
			ids[i] = id
			same = false
		}
	}
	s.view = r.approx.Current()
	approximate := r.approx.Enabled() && !s.view.AllLive()
	for p := 0; p+1 < len(st.bounds); p++ {
		keys := st.keys[st.bounds[p]:st.bounds[p+1]]
		if len(keys) == 0 {
			continue
		}
		r.index.Match(keys, st.ids, &st.match)
		st.match.AddTo(st.blocks, st.weighted)
		if approximate {
			s.approxMatch(keys) // endpoints whose events are not live (approx.go)
		}
		st.matched = p
	}
	// One pass over the candidates: the load counters (resolved once per
	// candidate list, the list compared once, above) beside the match,
	// written where the filter reads them. The uncached tokens (the
	// request's own terms computed once) are projected here only when the
	// affinity filter weighs them; otherwise only for the candidates that
	// need them (s.uncached: the scored ones and the chosen one; the
	// crowding rule projects its own when it needs them,
	// affinity.Filter.ApplyProjected).
	r.load.View(&st.loads, st.ids, same)
	s.unc = tokenload.NewUncached(s.promptTokens, s.total, r.cfg.BlockSize)
	withRequest, held := r.cfg.Affinity.IncludeRequestTokens, 0
	// The slices read once (a store to a candidate would otherwise reload
	// them), all of the candidates' length.
	n := len(st.ids)
	cands, weighted, blocks, open, loads := st.cands[:n], st.weighted[:n], st.blocks[:n], st.open[:n], &st.loads
	for i := range cands {
		w := weighted[i]
		tokens, requests := loads.Load(i)
		// Written field by field in place: a Candidate built aside and
		// copied in cost several times the fields' own stores.
		c := &cands[i]
		c.Score, c.InFlightTokens, c.OpenRequests = w, tokens, requests // the crowding rule counts requests
		c.LoadKnown = true                                              // the tracker sees every request this router dispatched
		c.RequestTokens = 0
		if withRequest {
			c.RequestTokens = s.unc.Of(w)
		}
		open[i] = requests
		held |= blocks[i] // block counts are never negative: nonzero when one holds a block
	}
	s.usedCache = held != 0
}

// uncached returns the prompt tokens candidate i would have to prefill:
// the load the request would add there (tokenload.UncachedTokens of its
// tier-weighted match).
func (s *Selection) uncached(i int) int64 { return s.unc.Of(s.st.weighted[i]) }

// matchOf returns candidate i's match for an extra scorer: Blocks and Score
// are summed over the request's prompts, the per-tier counts are those of its
// last prompt with keys; all zero when nothing was matched.
func (s *Selection) matchOf(i int) kvindex.EndpointMatch {
	st := &s.st
	m := kvindex.EndpointMatch{Endpoint: st.ids[i]}
	if i < st.match.Len() {
		m = st.match.At(i)
	}
	m.Blocks, m.Score = st.blocks[i], st.weighted[i]
	return m
}
