package kvroute

import (
	"context"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/tokenload"
)

// pickState is the per-request scratch of a Selection, pooled so that a
// steady stream of requests allocates little beyond the Decision itself.
type pickState struct {
	keys      []kvindex.Key // every prompt's keys, concatenated
	tmp       []kvindex.Key // one prompt's keys
	bounds    []int         // prompt i's keys are keys[bounds[i]:bounds[i+1]]
	match     kvindex.MatchResult
	ids       []string
	blocks    []int     // per candidate: contiguous blocks, summed over prompts
	weighted  []float64 // per candidate: tier-weighted score, summed over prompts
	uncached  []int64   // per candidate: this request's projected uncached tokens
	open      []int64   // per candidate: token-equivalent load of its open requests
	scores    []float64 // per candidate: total score (valid for the kept ones once scored)
	cands     []affinity.Candidate
	pass      []int  // the candidates the affinity filter kept
	kept      []bool // per candidate: in pass; empty until Selection.Kept needs it
	mm        []kvindex.MMItem
	renderRes render.Result // the render client's answer, its token arrays reused
}

// maxKeptTokens bounds the token arrays a pooled scratch keeps for the next
// request: a rare huge prompt does not stay pinned in the pool.
const maxKeptTokens = 1 << 16

// trimRendered drops the rendered prompts' multimodal items (references to
// the request) and any token array above maxKeptTokens.
func (st *pickState) trimRendered() {
	ps := st.renderRes.Prompts[:cap(st.renderRes.Prompts)]
	for i := range ps {
		ps[i].Features = nil
		if cap(ps[i].TokenIDs) > maxKeptTokens {
			ps[i].TokenIDs = nil
		}
	}
	if len(ps) > 16 {
		st.renderRes.Prompts = nil
	}
	st.renderRes.CacheSalt, st.renderRes.Endpoint = "", ""
}

func (st *pickState) reset(n int) {
	st.keys, st.bounds, st.ids, st.pass = st.keys[:0], st.bounds[:0], st.ids[:0], st.pass[:0]
	st.match.Reset() // no stale match when nothing is matched
	st.blocks = resize(st.blocks, n)
	st.weighted = resize(st.weighted, n)
	st.uncached = resize(st.uncached, n)
	st.open = resize(st.open, n)
	st.scores = grow(st.scores, n) // written for the kept candidates before any read
	st.cands = resize(st.cands, n)
	st.kept = st.kept[:0] // built on demand by Selection.Kept
}

// grow returns s with length n, its contents unspecified.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// Pick chooses an endpoint for req among endpoints: Match, Filter, Score and
// Commit of the best-scored candidate, in one call. See Router for the
// pipeline and Selection for the stages. A render failure does not fail
// Pick: the request is routed by load alone, the failure is counted and
// Decision.RenderErr says so.
func (r *Router) Pick(ctx context.Context, req *Request, endpoints []Endpoint) (*Decision, error) {
	s, err := r.Match(ctx, req, endpoints)
	if err != nil {
		return nil, err
	}
	defer s.Release()
	s.Filter()
	best, _ := s.Score()
	return s.Commit(best)
}

// render is the render stage: the request's prompts (given, or the render
// client's answer), its cache salt and the render failure, if any.
func (s *Selection) render(ctx context.Context) {
	s.prompts, s.salt, s.renderErr = s.r.prompts(ctx, s.req, &s.st)
}

// keys is the block-key stage: every prompt's keys, concatenated, with the
// prompt bounds, the prompt tokens and the number of keys.
func (s *Selection) keys() {
	st, bs := &s.st, s.r.cfg.BlockSize
	model := s.req.Model
	if model == "" {
		model = s.r.cfg.Model
	}
	st.bounds = append(st.bounds, 0)
	for _, p := range s.prompts {
		st.mm = st.mm[:0]
		for _, m := range p.Features {
			st.mm = append(st.mm, kvindex.MMItem{Hash: m.Hash, Offset: m.Offset, Length: m.Length})
		}
		params := kvindex.KeyParams{Model: model, LoRA: s.req.LoRA, CacheSalt: s.salt, MM: st.mm}
		st.tmp = kvindex.Keys(st.tmp, p.TokenIDs, bs, &params)
		st.keys = append(st.keys, st.tmp...)
		s.promptTokens += len(p.TokenIDs)
		st.bounds = append(st.bounds, len(st.keys))
	}
	s.total = len(st.keys)
}

// lookup is the index-lookup stage: each prompt's longest cached prefix on
// every candidate, summed over prompts, then each candidate's projected
// uncached tokens and in-flight load.
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
		st.open[i] = tokenload.OpenRequestLoad(open, r.cfg.OpenRequestTokens)
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

// prompts returns the request's prompts: the given ones, or the render
// client's answer. The returned slice is valid until st is reused.
func (r *Router) prompts(ctx context.Context, req *Request, st *pickState) ([]Prompt, string, error) {
	if len(req.Prompts) > 0 {
		return req.Prompts, req.CacheSalt, nil
	}
	if r.render == nil {
		return nil, "", errRenderDisabled
	}
	auth := ""
	if req.Header != nil {
		auth = req.Header.Get("Authorization")
	}
	// The scratch's render result is reused, so that its token arrays are:
	// a 2,000-token prompt then costs no 8 KB array per request.
	res := &st.renderRes
	if err := r.render.RenderInto(ctx, &render.Request{API: req.API, Body: req.Body, Authorization: auth}, res); err != nil {
		return nil, "", err
	}
	salt := res.CacheSalt
	if salt == "" {
		salt = req.CacheSalt
	}
	return res.Prompts, salt, nil
}

func clamp01(v float64) float64 {
	switch {
	case v > 1:
		return 1
	case v >= 0:
		return v
	default:
		return 0 // negative and NaN
	}
}
