package kvroute

import (
	"unsafe"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/tokenload"
)

// lookup is the index-lookup stage: each prompt's longest cached prefix on
// every candidate, summed over prompts, then each candidate's projected
// uncached tokens and in-flight load (tokens and open requests).
//
// Its per-candidate work is what the index hands back, summed in one pass
// (MatchResult.AddTo), one read of the candidate's load counters (resolved
// once per candidate list, not hashed per request: tokenload.LoadView), and
// the uncached tokens, the request's own terms computed once.
// This is the one place the candidates' load is read, so load reported by
// peer routers joins here (local + peers', as Tracker.Load gives it).
func (s *Selection) lookup() {
	r, st := s.r, &s.st
	st.ids = grow(st.ids, len(s.eps))
	for i := range s.eps {
		// Written only when it changed: a host passes the same candidates
		// request after request.
		if id := s.eps[i].ID; unsafe.StringData(st.ids[i]) != unsafe.StringData(id) || len(st.ids[i]) != len(id) {
			st.ids[i] = id
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
	r.load.LoadAll(&st.loads, st.ids, st.tokens, st.open)
	bs, promptTokens, total := r.cfg.BlockSize, s.promptTokens, s.total
	tokenload.UncachedTokensAll(st.uncached, promptTokens, total, st.weighted, bs)
	for i := range st.ids {
		st.cands[i] = affinity.Candidate{
			Score:          st.weighted[i],
			InFlightTokens: st.tokens[i],
			LoadKnown:      true, // the tracker sees every request this router dispatched
			RequestTokens:  st.uncached[i],
			OpenRequests:   st.open[i],
		}
		if st.blocks[i] > 0 {
			s.usedCache = true
		}
	}
}

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
