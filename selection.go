package kvroute

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/trace"

	"github.com/kvroute/kvroute/affinity"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
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
