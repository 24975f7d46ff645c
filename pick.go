package kvroute

import (
	"context"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/tokenload"
)

// pickState is the per-call scratch of Pick, pooled so that a steady stream
// of requests allocates little beyond the Decision itself.
type pickState struct {
	keys      []kvindex.Key // every prompt's keys, concatenated
	tmp       []kvindex.Key // one prompt's keys
	bounds    []int         // prompt i's keys are keys[bounds[i]:bounds[i+1]]
	match     kvindex.MatchResult
	ids       []string
	blocks    []int     // per candidate: contiguous blocks, summed over prompts
	weighted  []float64 // per candidate: tier-weighted score, summed over prompts
	uncached  []int64   // per candidate: this request's projected uncached tokens
	cands     []affinity.Candidate
	pass      []int
	mm        []kvindex.MMItem
	rendered  []Prompt
	renderRes render.Result
}

func (st *pickState) reset(n int) {
	st.keys, st.bounds, st.ids = st.keys[:0], st.bounds[:0], st.ids[:0]
	st.match.Endpoints = st.match.Endpoints[:0] // no stale match when nothing is matched
	st.blocks = resize(st.blocks, n)
	st.weighted = resize(st.weighted, n)
	st.uncached = resize(st.uncached, n)
	st.cands = resize(st.cands, n)
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// Pick chooses an endpoint for req among endpoints. See Router for the
// pipeline. A render failure does not fail Pick: the request is routed by
// load alone, the failure is counted and Decision.RenderErr says so.
func (r *Router) Pick(ctx context.Context, req *Request, endpoints []Endpoint) (*Decision, error) {
	if len(endpoints) == 0 {
		return nil, ErrNoEndpoints
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := r.scratch.Get().(*pickState)
	defer r.scratch.Put(st)
	n := len(endpoints)
	st.reset(n)

	prompts, salt, renderErr := r.prompts(ctx, req, st)
	if renderErr != nil {
		if err := ctx.Err(); err != nil {
			return nil, err // the caller is gone; nothing to route
		}
		r.met.renderFallbacks.Inc()
		r.log.Debug("render failed; routing by load alone", "request", req.ID, "err", renderErr)
	}

	for _, e := range endpoints {
		st.ids = append(st.ids, e.ID)
	}
	bs := r.cfg.BlockSize
	model := req.Model
	if model == "" {
		model = r.cfg.Model
	}
	promptTokens, total := 0, 0
	st.bounds = append(st.bounds, 0)
	for _, p := range prompts {
		st.mm = st.mm[:0]
		for _, m := range p.MM {
			st.mm = append(st.mm, kvindex.MMItem{Hash: m.Hash, Offset: m.Offset, Length: m.Length})
		}
		params := kvindex.KeyParams{Model: model, LoRA: req.LoRA, CacheSalt: salt, MM: st.mm}
		st.tmp = kvindex.Keys(st.tmp, p.Tokens, bs, &params)
		start := len(st.keys)
		st.keys = append(st.keys, st.tmp...)
		promptTokens += len(p.Tokens)
		keys := st.keys[start:]
		total += len(keys)
		st.bounds = append(st.bounds, len(st.keys))
		if len(keys) == 0 {
			continue
		}
		r.index.Match(keys, st.ids, &st.match)
		for i := range st.match.Endpoints {
			st.blocks[i] += st.match.Endpoints[i].Blocks
			st.weighted[i] += st.match.Endpoints[i].Score
		}
	}

	usedCache := false
	for i, e := range endpoints {
		tok, _, _ := r.load.Load(e.ID)
		st.uncached[i] = tokenload.UncachedTokens(promptTokens, total, st.weighted[i], bs)
		st.cands[i] = affinity.Candidate{
			Score:          st.weighted[i],
			InFlightTokens: tok,
			LoadKnown:      true, // the tracker sees every request this router dispatched
			RequestTokens:  st.uncached[i],
		}
		if st.blocks[i] > 0 {
			usedCache = true
		}
	}
	pass, outcome := r.filter.Apply(st.pass, total, st.cands)
	st.pass = pass

	best, bestScore, ties := -1, 0.0, 0
	for _, i := range pass {
		s := r.cfg.LoadWeight * tokenload.Score(st.cands[i].InFlightTokens, st.uncached[i], r.cfg.QueueThresholdTokens)
		for _, ws := range r.scorers {
			s += ws.Weight * clamp01(ws.Scorer.Score(req, endpoints[i], r.matchOf(st, i)))
		}
		switch {
		case best < 0 || s > bestScore:
			best, bestScore, ties = i, s, 1
		case s == bestScore:
			ties++ // reservoir sampling: each tied endpoint wins with probability 1/ties
			if r.random()*float64(ties) < 1 {
				best = i
			}
		}
	}
	chosen := endpoints[best]

	if r.cfg.Speculative.Enabled && total > 0 {
		for p := 0; p+1 < len(st.bounds); p++ {
			if keys := st.keys[st.bounds[p]:st.bounds[p+1]]; len(keys) > 0 {
				r.index.Speculate(chosen.ID, keys, r.cfg.Speculative.TTL)
			}
		}
	}

	d := &Decision{
		Endpoint:       chosen,
		PromptTokens:   promptTokens,
		CachedTokens:   min(st.blocks[best]*bs, promptTokens),
		UncachedTokens: st.uncached[best],
		UsedCache:      usedCache,
		Outcome:        outcome,
		RenderErr:      renderErr,
		Score:          bestScore,
	}
	r.load.DispatchInto(&d.inflight, chosen.ID, d.UncachedTokens)
	if promptTokens > 0 {
		r.met.predicted.Observe(float64(d.CachedTokens))
		r.met.prompt.Observe(float64(promptTokens))
	}
	if usedCache {
		r.met.decisions[decisionPrecise].Inc()
	} else {
		r.met.decisions[decisionLoadOnly].Inc()
	}
	return d, nil
}

// matchOf returns candidate i's match for an extra scorer: Blocks and Score
// are summed over the request's prompts, the per-tier counts are those of its
// last prompt with keys; all zero when nothing was matched.
func (r *Router) matchOf(st *pickState, i int) *kvindex.EndpointMatch {
	m := kvindex.EndpointMatch{Endpoint: st.ids[i]}
	if i < len(st.match.Endpoints) {
		m = st.match.Endpoints[i]
	}
	m.Blocks, m.Score = st.blocks[i], st.weighted[i]
	return &m
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
	res, err := r.render.Render(ctx, &render.Request{API: req.API, Body: req.Body, Authorization: auth})
	if err != nil {
		return nil, "", err
	}
	st.rendered = st.rendered[:0]
	for _, p := range res.Prompts {
		var mm []MMItem
		for _, f := range p.Features {
			mm = append(mm, MMItem{Hash: f.Hash, Offset: f.Offset, Length: f.Length})
		}
		st.rendered = append(st.rendered, Prompt{Tokens: p.TokenIDs, MM: mm})
	}
	salt := res.CacheSalt
	if salt == "" {
		salt = req.CacheSalt
	}
	return st.rendered, salt, nil
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
