package kvroute

import (
	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/tokenload"
)

// lookup is the index-lookup stage: each prompt's longest cached prefix on
// every candidate, summed over prompts, then each candidate's projected
// uncached tokens and in-flight load (tokens and open requests).
func (s *Selection) lookup() {
	r, st := s.r, &s.st
	for _, e := range s.eps {
		st.ids = append(st.ids, e.ID)
	}
	for p := 0; p+1 < len(st.bounds); p++ {
		keys := st.keys[st.bounds[p]:st.bounds[p+1]]
		if len(keys) == 0 {
			continue
		}
		r.index.Match(keys, st.ids, &st.match)
		for i := range st.match.Len() {
			st.blocks[i] += st.match.Blocks(i)
			st.weighted[i] += st.match.Score(i)
		}
	}
	bs, promptTokens, total := r.cfg.BlockSize, s.promptTokens, s.total
	for i, e := range s.eps {
		tok, open := r.inflightTokens(e.ID)
		st.open[i] = open
		st.uncached[i] = tokenload.UncachedTokens(promptTokens, total, st.weighted[i], bs)
		st.cands[i] = affinity.Candidate{
			Score:          st.weighted[i],
			InFlightTokens: tok,
			LoadKnown:      true, // the tracker sees every request this router dispatched
			RequestTokens:  st.uncached[i],
		}
		if st.blocks[i] > 0 {
			s.usedCache = true
		}
	}
}

// inflightTokens is the committed load the router sees on an endpoint: what
// this router dispatched there and has not seen the first chunk of, and the
// requests it dispatched there that are still open (not Done). It is the
// one place the candidates' load is read, so load reported by peer routers
// joins here (local + peers').
func (r *Router) inflightTokens(id string) (tokens, open int64) {
	tokens, open, _ = r.load.Load(id)
	return tokens, open
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
