package kvroute

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/tokenload"
)

// Selection is one request on its way through the router's stages, for hosts
// that run them from separate hooks (an Envoy ext_proc server, a scheduler
// plugin framework with its own filters and pickers). Pick is exactly
//
//	s, err := r.Match(ctx, req, endpoints) // render → keys → index lookup
//	if err != nil { ... }
//	defer s.Release()
//	s.Filter()                             // affinity filter
//	best, _ := s.Score()                   // token-load + extra scorers, ties by rendezvous hash
//	d, err := s.Commit(best)               // speculative entries, load accounting, metrics
//
// and a host may stop after any stage, read the per-candidate results (Len,
// Endpoint, EndpointMatch, UncachedTokens, Kept, ScoreOf), and commit a
// candidate it chose itself. The stages are, in this order: render, keys and
// index lookup (inside Match), filter (Filter), score (Score), and commit
// (Commit); each later stage runs the earlier ones it needs, so calling only
// Match and Commit is valid.
//
// A Selection is not safe for concurrent use and belongs to the router's
// pool: Release it when done (after Commit the Decision stays valid; the
// Selection and the slices it returned must not be used after Release).
type Selection struct {
	r   *Router
	req *Request
	eps []Endpoint
	st  pickState

	prompts      []Prompt
	salt         string
	renderErr    error
	promptTokens int
	total        int
	usedCache    bool

	filtered, scored, committed bool
	outcome                     affinity.Outcome

	// The pick span and the context carrying it, when the router traces.
	span      trace.Span
	tctx      context.Context
	best      int
	bestScore float64
}

// ErrCommitted is returned by Commit on a Selection that was already
// committed: a request is accounted for once.
var ErrCommitted = errors.New("kvroute: selection already committed")

// Match is the first stage of Pick: it renders the request (unless it
// carries Prompts), computes its block keys and looks them up in the index
// for every candidate, and reads each candidate's in-flight load. Its errors
// are Pick's: ErrNoEndpoints, the context's error, and the mistakes that
// would otherwise route without cache information (ErrEndpointsNotSet,
// ErrNoAPI, ErrModelMismatch). A render failure is not an error (see
// Selection.RenderErr). The caller must Release the Selection.
func (r *Router) Match(ctx context.Context, req *Request, endpoints []Endpoint) (*Selection, error) {
	if len(endpoints) == 0 {
		return nil, ErrNoEndpoints
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := r.checkRequest(req); err != nil {
		return nil, err
	}
	s := r.selections.Get().(*Selection)
	s.r, s.req, s.eps = r, req, endpoints
	s.promptTokens, s.total, s.usedCache = 0, 0, false
	s.filtered, s.scored, s.committed = false, false, false
	s.outcome, s.best, s.bestScore = 0, -1, 0
	s.st.reset(len(endpoints))
	ctx = s.startPick(ctx)

	s.render(ctx)
	if s.renderErr != nil {
		if err := ctx.Err(); err != nil {
			s.endPick(err)
			s.Release()
			return nil, err // the caller is gone; nothing to route
		}
		r.met.renderFallbacks.Inc()
		r.log.Debug("render failed; routing by load alone", "request", req.ID, "err", s.renderErr)
	}
	if sp := s.child(SpanKeys); sp != nil {
		s.keys()
		s.traceKeys(sp)
	} else {
		s.keys()
	}
	if sp := s.child(SpanIndexLookup); sp != nil {
		s.lookup()
		s.traceLookup(sp)
	} else {
		s.lookup()
	}
	return s, nil
}

// Release returns the Selection to the router's pool. Calling it twice, or
// using the Selection afterwards, is a bug.
func (s *Selection) Release() {
	r := s.r
	if r == nil {
		return
	}
	s.endPick(nil)
	// Drop the references (Match resets the rest); the scratch keeps its capacity.
	s.r, s.req, s.eps, s.prompts, s.renderErr, s.salt = nil, nil, nil, nil, nil, ""
	s.st.trimRendered()
	r.selections.Put(s)
}

// Len returns the number of candidates (the endpoints passed to Match).
func (s *Selection) Len() int { return len(s.eps) }

// Endpoint returns candidate i.
func (s *Selection) Endpoint(i int) Endpoint { return s.eps[i] }

// EndpointMatch returns candidate i's cached prefix: Blocks and Score
// (tier-weighted) summed over the request's prompts, the per-tier counts of
// its last prompt with keys; all zero when nothing matched.
func (s *Selection) EndpointMatch(i int) kvindex.EndpointMatch { return s.matchOf(i) }

// UncachedTokens returns the prompt tokens candidate i would have to
// prefill: the load the request would add there.
func (s *Selection) UncachedTokens(i int) int64 { return s.st.uncached[i] }

// InFlightTokens returns candidate i's committed load as read by Match.
func (s *Selection) InFlightTokens(i int) int64 { return s.st.cands[i].InFlightTokens }

// PromptTokens returns the request's prompt tokens, summed over prompts; 0
// when rendering failed.
func (s *Selection) PromptTokens() int { return s.promptTokens }

// TotalBlocks returns the number of full blocks the prompts were keyed into.
func (s *Selection) TotalBlocks() int { return s.total }

// RenderErr returns the render failure when the request could not be
// tokenized; the request is then routed by load alone.
func (s *Selection) RenderErr() error { return s.renderErr }

// UsedCache reports whether any candidate holds part of the request.
func (s *Selection) UsedCache() bool { return s.usedCache }

// Filter is the affinity stage: it keeps the candidates that hold enough of
// the request (sticky) unless the TTFT gate, exploration or a missing
// signal says otherwise, and returns the kept candidates' indices (valid
// until Release) with the outcome. It runs once; later calls return the
// same answer.
func (s *Selection) Filter() (kept []int, outcome affinity.Outcome) {
	if !s.filtered {
		sp := s.child(SpanFilter)
		s.st.pass, s.outcome = s.r.filter.Apply(s.st.pass, s.total, s.st.cands)
		s.filtered = true
		if sp != nil {
			s.traceFilter(sp)
		}
	}
	return s.st.pass, s.outcome
}

// Kept reports whether the affinity filter kept candidate i (running Filter
// if it has not run).
func (s *Selection) Kept(i int) bool {
	kept, _ := s.Filter()
	st := &s.st
	if len(st.kept) == 0 {
		st.kept = resize(st.kept, len(s.eps))
		for _, k := range kept {
			st.kept[k] = true
		}
	}
	return st.kept[i]
}

// Score is the scoring stage: every kept candidate's token-load score times
// Config.LoadWeight plus each extra scorer's weighted, clamped score. It
// returns the best candidate and its score. Ties go to the candidate that
// ranks highest for this request: a hash of the request's first new block
// (the first block beyond the longest prefix any kept candidate holds) and
// the endpoint's ID, the same on every router, so replicas agree and one new
// prefix stays on one endpoint; a request without block keys breaks its ties
// with Options.Random. It runs Filter first if needed, and runs once.
func (s *Selection) Score() (best int, score float64) {
	if s.scored {
		return s.best, s.bestScore
	}
	kept, _ := s.Filter()
	sp := s.child(SpanScore)
	r, st := s.r, &s.st
	for _, i := range kept {
		sc := r.cfg.LoadWeight * tokenload.Score(st.committed(i), st.uncached[i], r.cfg.QueueThresholdTokens)
		for _, ws := range r.scorers {
			m := s.matchOf(i)
			sc += ws.Weight * clamp01(ws.Scorer.Score(s.req, s.eps[i], &m))
		}
		st.scores[i] = sc
	}
	best, score = s.bestOf(kept)
	s.best, s.bestScore, s.scored = best, score, true
	if sp != nil {
		s.traceScore(sp)
	}
	return best, score
}

// ScoreOf returns candidate i's total score and whether it was scored (it
// was kept by the filter), running Score if it has not run.
func (s *Selection) ScoreOf(i int) (float64, bool) {
	s.Score()
	if !s.Kept(i) {
		return 0, false
	}
	return s.st.scores[i], true
}

// Commit is the last stage: it records that the request goes to candidate i
// (normally Score's best, but any candidate a host chose): the load tracker
// counts its uncached tokens on the endpoint, speculative index entries make
// the endpoint warm for the request's prefix until the engine confirms it,
// the prediction metrics are observed, and, when the Request has an ID, the
// Decision is filed under it in the router's request table (see
// Router.Decision). Commit
// fails, having changed nothing, with ErrCommitted on a second call, an
// out-of-range i, or tokenload.ErrDuplicateRequestID /
// tokenload.ErrInvalidRequestID for the request's ID.
func (s *Selection) Commit(i int) (*Decision, error) {
	if s.committed {
		return nil, ErrCommitted
	}
	if i < 0 || i >= len(s.eps) {
		return nil, fmt.Errorf("kvroute: commit of candidate %d of %d", i, len(s.eps))
	}
	r, st, bs := s.r, &s.st, s.r.cfg.BlockSize
	chosen := s.eps[i]
	d := &Decision{
		Endpoint:       chosen,
		PromptTokens:   s.promptTokens,
		CachedTokens:   min(st.blocks[i]*bs, s.promptTokens),
		UncachedTokens: st.uncached[i],
		UsedCache:      s.usedCache,
		Outcome:        s.outcome,
		RenderErr:      s.renderErr,
	}
	if s.scored && (i == s.best || s.Kept(i)) {
		d.Score = st.scores[i]
	}
	r.load.DispatchInto(&d.inflight, chosen.ID, d.UncachedTokens)
	if s.renderErr == nil && s.promptTokens > 0 {
		d.acc = r.acc // a prediction: the request's end ends it in the accuracy loop
		r.acc.Begin()
	}
	if s.req.ID != "" {
		d.table, d.id = r.requests, s.req.ID // before filing: from then on the table may end d
		if err := r.requests.Register(s.req.ID, tableHandle{d}); err != nil {
			d.end(DoneInfo{Err: err}, false) // undo: nothing of this request stays accounted
			return nil, err
		}
	}
	s.committed = true
	s.traceCommit(d)

	if r.cfg.Speculative.Enabled && s.total > 0 {
		for p := 0; p+1 < len(st.bounds); p++ {
			if keys := st.keys[st.bounds[p]:st.bounds[p+1]]; len(keys) > 0 {
				r.index.Speculate(chosen.ID, keys, r.cfg.Speculative.TTL)
			}
		}
		r.cluster.Publish(chosen.ID, st.keys) // the other replicas speculate too; nil-safe, never blocks
	}
	if s.promptTokens > 0 {
		r.met.predicted.Observe(float64(d.CachedTokens))
		r.met.prompt.Observe(float64(s.promptTokens))
	}
	if s.usedCache {
		r.met.decisions[decisionPrecise].Inc()
	} else {
		r.met.decisions[decisionLoadOnly].Inc()
		r.blind(s)
	}
	return d, nil
}
