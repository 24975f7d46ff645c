package kvroute

import (
	"context"
	"math"
	"sync"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/tokenload"
)

var legacyScratch = sync.Pool{New: func() any { return new(pickState) }}

// legacyPick is Pick as it was before the stages (one function), kept as
// the reference of the differential test and the benchmark: verbatim but
// for the extra scorers, which it does not run (the stages' Scorer reads a
// Selection), the open-request load, which it keeps in the scratch's
// open slice as it did, and the uncached tokens, which it reads back from
// the candidates' RequestTokens (the scratch has no slice of its own for
// them any more).
func (r *Router) legacyPick(ctx context.Context, req *Request, endpoints []Endpoint) (*Decision, error) {
	if len(r.pipe.scorers) > 1 {
		panic("legacyPick runs no extra scorers")
	}
	if len(endpoints) == 0 {
		return nil, ErrNoEndpoints
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := legacyScratch.Get().(*pickState)
	defer legacyScratch.Put(st)
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

	st.ids = st.ids[:0]
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
		for _, m := range p.Features {
			st.mm = append(st.mm, kvindex.MMItem{Hash: m.Hash, Offset: m.Offset, Length: m.Length})
		}
		params := kvindex.KeyParams{Model: model, LoRA: req.LoRA, CacheSalt: salt, MM: st.mm}
		st.tmp = kvindex.Keys(st.tmp, p.TokenIDs, bs, &params)
		start := len(st.keys)
		st.keys = append(st.keys, st.tmp...)
		promptTokens += len(p.TokenIDs)
		keys := st.keys[start:]
		total += len(keys)
		st.bounds = append(st.bounds, len(st.keys))
		if len(keys) == 0 {
			continue
		}
		r.index.Match(keys, st.ids, &st.match)
		for i := range st.match.Len() {
			st.blocks[i] += st.match.Blocks(i)
			st.weighted[i] += st.match.Score(i)
		}
	}

	usedCache := false
	for i, e := range endpoints {
		tok, open, _ := r.load.Load(e.ID)
		st.open[i] = tokenload.OpenRequestLoad(open, *r.cfg.OpenRequestTokens)
		st.cands[i] = affinity.Candidate{
			Score:          st.weighted[i],
			InFlightTokens: tok,
			LoadKnown:      true, // the tracker sees every request this router dispatched
			RequestTokens:  tokenload.UncachedTokens(promptTokens, total, st.weighted[i], bs),
			OpenRequests:   open, // the affinity filter's crowding rule counts requests
		}
		if st.blocks[i] > 0 {
			usedCache = true
		}
	}
	pass, outcome := r.filter.Apply(st.pass, total, st.cands)
	st.pass = pass

	best, bestScore, ties := -1, 0.0, 0
	var tied []int
	for _, i := range pass {
		tok := max(st.cands[i].InFlightTokens, 0)
		committed := tok + min(st.open[i], math.MaxInt64-tok)
		s := r.cfg.LoadWeight * tokenload.Score(committed, st.cands[i].RequestTokens, r.cfg.QueueThresholdTokens)
		switch {
		case best < 0 || s > bestScore:
			best, bestScore, ties, tied = i, s, 1, append(tied[:0], i)
		case s == bestScore:
			tied = append(tied, i)
			ties++ // no block keys: reservoir sampling, each tied endpoint wins with probability 1/ties
			if len(st.keys) == 0 && r.random()*float64(ties) < 1 {
				best = i
			}
		}
	}
	if len(tied) > 1 && len(st.keys) > 0 {
		// the tied endpoint ranking highest for the request's first new block
		deepest := 0
		for _, i := range pass {
			deepest = max(deepest, st.blocks[i])
		}
		key := st.keys[min(deepest, len(st.keys)-1)]
		for _, i := range tied {
			if tieRank(key, endpoints[i].ID) > tieRank(key, endpoints[best].ID) {
				best = i
			}
		}
	}
	chosen := endpoints[best]

	if *r.cfg.Speculative.Enabled && total > 0 {
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
		UncachedTokens: st.cands[best].RequestTokens,
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
