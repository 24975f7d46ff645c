package kvroute

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
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
// and a host may stop after any stage, read what the stages know of each
// candidate (Len, Candidate), and commit a candidate it chose itself. The
// stages are, in this order: admission, render, keys and index lookup
// (inside Match), filter (Filter), score and pick (Score), and commit
// (Commit); each later stage runs the earlier ones it needs, so calling only
// Match and Commit is valid. Match admits the request with the router's
// Admission; the profile step is Pick's only (a host picking in several
// roles runs a Selection per role).
//
// A Selection is not safe for concurrent use and belongs to the router's
// pool: Release it when done (after Commit the Decision stays valid; the
// Selection and the slices it returned must not be used after Release).
// Releasing a Selection of Match without a Commit tells the admission that
// the request is not routed (see Release).
type Selection struct {
	r   *Router
	req *Request
	eps []Endpoint
	st  pickState

	prompts      []render.Prompt
	salt         string
	renderErr    error
	promptTokens int
	total        int
	usedCache    bool
	view         *approx.View       // the endpoints' modes for this request (lookup)
	unc          tokenload.Uncached // the request's terms of its uncached tokens (lookup)

	filtered, scored, committed bool
	outcome                     affinity.Outcome

	// inProfile: a Profile runs the Selection inside Pick (stages), and
	// may still add Roles to its Decision after Commit.
	inProfile bool
	// admitted is the context Match admitted the request under (nil for a
	// profile's Selection, which Pick admitted): Release without a Commit
	// tells the admission that the request is not routed (abandon).
	admitted context.Context

	// The pick span and the context carrying it, when the router traces.
	span      trace.Span
	tctx      context.Context
	best      int
	bestScore float64
}

// Match is the first part of Pick: it admits the request (Options.Admission),
// renders it (unless it carries Prompts), computes its block keys and looks
// them up in the index for every candidate, and reads each candidate's
// in-flight load. Its errors are Pick's but Commit's: ErrNoEndpoints, the
// context's error, the mistakes that would otherwise route without cache information
// (ErrEndpointsNotSet, ErrNoAPI, ErrModelMismatch) and the admission's
// refusal. A render failure is not an error (see Decision.RenderErr). The
// caller must Release the Selection.
func (r *Router) Match(ctx context.Context, req *Request, endpoints []Endpoint) (*Selection, error) {
	endpoints, err := r.admit(ctx, req, endpoints)
	if err != nil {
		return nil, err
	}
	s, err := r.match(ctx, req, endpoints)
	if err != nil {
		r.abandon(ctx)
		return nil, err
	}
	s.admitted = ctx
	return s, nil
}

// match is Match after the admission: render → keys → lookup.
func (r *Router) match(ctx context.Context, req *Request, endpoints []Endpoint) (*Selection, error) {
	if err := r.check(ctx, req, endpoints); err != nil {
		return nil, err
	}
	r.applyDefaultMMLoRA(req)
	s := r.selections.Get().(*Selection)
	s.r, s.req, s.eps = r, req, endpoints
	s.promptTokens, s.total, s.usedCache = 0, 0, false
	s.filtered, s.scored, s.committed, s.inProfile = false, false, false, false
	s.admitted = nil
	s.outcome, s.best, s.bestScore = 0, -1, 0
	s.st.reset(len(endpoints))
	ctx = s.startPick(ctx)

	if err := s.render(ctx); err != nil {
		s.endPick(err)
		s.Release()
		return nil, err // the caller is gone; nothing to route
	}
	if sp := s.child(spanKeys); sp != nil {
		s.keys()
		s.traceKeys(sp)
	} else {
		s.keys()
	}
	if sp := s.child(spanIndexLookup); sp != nil {
		s.lookup()
		s.traceLookup(sp)
	} else {
		s.lookup()
	}
	return s, nil
}

// Release returns the Selection to the router's pool. Calling it twice, or
// using the Selection afterwards, is a bug. A Selection of Router.Match
// released without a Commit is a request admitted and not routed: Release
// tells the admission, as a failed Match does (see Admission's Abandon),
// so that an admission.Controller gives back at once the claim the
// request's release from its queue took, instead of at the end of the
// request's context or after its settle time (admission.Config.Settle).
func (s *Selection) Release() {
	r := s.r
	if r == nil {
		return
	}
	s.endPick(nil)
	if ctx := s.admitted; ctx != nil && !s.committed {
		r.abandon(ctx)
	}
	// Drop the references (Match resets the rest); the scratch keeps its capacity.
	s.r, s.req, s.eps, s.prompts, s.renderErr, s.salt, s.admitted = nil, nil, nil, nil, nil, "", nil
	s.st.trimRendered()
	r.selections.Put(s)
}

// Len returns the number of candidates (the endpoints passed to Match that
// serve the request's model).
func (s *Selection) Len() int { return len(s.eps) }

// Request returns the request being routed.
func (s *Selection) Request() *Request { return s.req }

// Candidate is what the stages know of one candidate endpoint of a request:
// what Filters and Scorers decide on, and what a host running the stages
// itself reads.
type Candidate struct {
	// Endpoint is the candidate endpoint.
	Endpoint Endpoint
	// Match is its cached prefix of the request: Blocks and Score
	// (tier-weighted) summed over the request's prompts, the per-tier
	// counts of its last prompt with keys; all zero when nothing matched.
	Match kvindex.EndpointMatch
	// UncachedTokens are the prompt tokens it would have to prefill: the
	// load the request would add there.
	UncachedTokens int64
	// InFlightTokens is its committed load in tokens, as read by Match.
	InFlightTokens int64
	// OpenRequests is the number of requests dispatched to it that are not
	// done yet, as read by Match.
	OpenRequests int64
	// Kept reports whether the filter stage kept it; false before it has
	// run.
	Kept bool
	// Score is its total score once the score stage has run and if it was
	// kept; 0 otherwise.
	Score float64
}

// Candidate returns what the stages know of candidate i so far.
func (s *Selection) Candidate(i int) Candidate {
	st := &s.st
	c := Candidate{
		Endpoint:       s.eps[i],
		Match:          s.matchOf(i),
		UncachedTokens: s.uncached(i),
		InFlightTokens: st.cands[i].InFlightTokens,
		OpenRequests:   st.open[i],
		Kept:           s.kept(i),
	}
	if s.scored && c.Kept {
		c.Score = st.scores[i]
	}
	return c
}

// pickState is the per-request scratch of a Selection, pooled so that a
// steady stream of requests allocates little beyond the Decision itself.
type pickState struct {
	keys      []kvindex.Key // every prompt's keys, concatenated
	tmp       []kvindex.Key // one prompt's keys
	bounds    []int         // prompt i's keys are keys[bounds[i]:bounds[i+1]]
	match     kvindex.MatchResult
	matched   int // the prompt whose match is in match; -1 when none
	ids       []string
	blocks    []int                // per candidate: contiguous blocks, summed over prompts
	weighted  []float64            // per candidate: tier-weighted score, summed over prompts
	open      []int64              // per candidate: its open requests
	loads     tokenload.LoadView   // the candidates' load counters, resolved for the next request with the same candidates
	scores    []float64            // per candidate: total score (valid for the kept ones once scored)
	cands     []affinity.Candidate // per candidate: what the affinity filter reads (RequestTokens only when it weighs them)
	pass      []int                // the candidates the filters kept
	sub       []affinity.Candidate // the affinity filter's candidates when earlier filters dropped some
	subPass   []int                // what it kept of sub
	kept      []bool               // per candidate: in pass; empty until Selection.Kept needs it
	eligible  []int                // what the affinity filter decided among, with Request.Fallbacks only
	ranked    []int                // Decision.Fallbacks' ranking scratch
	mm        []kvindex.MMItem
	mmPrefix  []byte        // the multimodal identifiers' prefix (keys_lora.go)
	approx    []int         // per candidate: blocks the approximate index matched (approx.go)
	renderRes render.Result // the render client's answer, its token arrays reused
}

// maxKeptTokens bounds the token arrays a pooled scratch keeps for the next
// request: a rare huge prompt does not stay pinned in the pool.
const maxKeptTokens = 1 << 16

// trimRendered drops the rendered prompts' multimodal items (references to
// the request) and any prompt whose token array is above maxKeptTokens.
func (st *pickState) trimRendered() {
	st.renderRes.Prompts = trimPrompts(st.renderRes.Prompts)
	st.renderRes.CacheSalt, st.renderRes.Endpoint = "", ""
}

// trimPrompts readies rendered prompts for a later render to reuse: it drops
// their multimodal items and every prompt whose token array is above
// maxKeptTokens (with the renderer's bytes of it, which render keeps beside
// the array and which are at most a few times its size), and all of them
// when there are more than 16.
func trimPrompts(prompts []render.Prompt) []render.Prompt {
	ps := prompts[:cap(prompts)]
	for i := range ps {
		ps[i].Features = nil
		if cap(ps[i].TokenIDs) > maxKeptTokens {
			ps[i] = render.Prompt{}
		}
	}
	if len(ps) > 16 {
		return nil
	}
	return prompts
}

func (st *pickState) reset(n int) {
	st.keys, st.bounds, st.pass = st.keys[:0], st.bounds[:0], st.pass[:0] // ids: lookup rewrites what changed
	st.match.Reset()                                                      // no stale match when nothing is matched
	st.matched = -1
	st.blocks = resize(st.blocks, n)
	st.weighted = resize(st.weighted, n)
	st.open = grow(st.open, n)     // lookup writes open and cands for every candidate
	st.scores = grow(st.scores, n) // written for the kept candidates before any read
	st.cands = grow(st.cands, n)
	st.kept = st.kept[:0] // built on demand by Selection.Kept
	st.eligible = st.eligible[:0]
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
