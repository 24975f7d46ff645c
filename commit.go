package kvroute

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/internal/endpointid"
)

// ErrCommitted is returned by Commit on a Selection that was already
// committed: a request is accounted for once.
var ErrCommitted = errors.New("kvroute: selection already committed")

// Commit is the last stage: it records that the request goes to candidate i
// (normally Score's best, but any candidate a host chose): the load tracker
// counts its uncached tokens on the endpoint, speculative index entries make
// the endpoint warm for the request's prefix until the engine confirms it,
// the prediction metrics are observed, and, when the Request has an ID, the
// Decision is filed under it in the router's request table (see
// Router.Decision; within Pick, it is reached there once Pick returns it:
// see Profile). Commit fails, having changed nothing: with ErrCommitted on
// a second call, with an error naming i when i is out of range, with
// ErrInvalidConfig when the chosen candidate's ID (or a fallback's) is one
// SetEndpoints would refuse, or with tokenload.ErrDuplicateRequestID /
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
	// The IDs the load tracker will label series with (the chosen one's
	// and, when it serves, a fallback's) must be IDs SetEndpoints accepts:
	// one not UTF-8 fails every scrape. Checked here, on the few IDs a
	// commit names, not on every candidate of every lookup.
	if err := endpointid.Check(chosen.ID); err != nil {
		return nil, fmt.Errorf("%w: endpoints[%d]: %w", ErrInvalidConfig, i, err)
	}
	fallbacks := s.fallbacks(i)
	for k := range fallbacks {
		if err := endpointid.Check(fallbacks[k].Endpoint.ID); err != nil {
			return nil, fmt.Errorf("%w: fallback endpoint: %w", ErrInvalidConfig, err)
		}
	}
	d := r.newDecision()
	d.Endpoint = chosen
	d.PromptTokens = s.promptTokens
	d.CachedTokens = min(st.blocks[i]*bs, s.promptTokens)
	d.UncachedTokens = s.uncached(i)
	if s.req.RemotePrefill {
		d.UncachedTokens = 0 // another endpoint computes the prompt
	}
	d.prefillOnly = s.req.PrefillOnly
	d.UsedCache = s.usedCache
	d.Outcome = s.outcome
	d.RenderErr = s.renderErr
	if s.scored && (i == s.best || s.kept(i)) {
		d.Score = st.scores[i]
	}
	if d.Fallbacks = fallbacks; d.Fallbacks != nil {
		d.moved.r = r
		if (*r.cfg.Speculative.Enabled || r.approx.Enabled()) && s.total > 0 { // what Served speculates (or records approximately) on the fallback
			d.moved.keys, d.moved.bounds = slices.Clone(st.keys), slices.Clone(st.bounds)
		}
	}
	r.load.DispatchAt(&d.inflight, &st.loads, i, chosen.ID, d.UncachedTokens) // the counters lookup read
	// A prediction: the request's end ends it in the accuracy loop. Not a
	// split request's decode pick: its engine reports the prompt it read
	// from the prefiller as cached, no measure of what the index predicted.
	if s.renderErr == nil && s.promptTokens > 0 && !s.req.RemotePrefill {
		d.acc = r.acc
		r.acc.Begin()
	}
	if s.req.ID != "" {
		d.table, d.id = r.requests, s.req.ID // before filing: from then on the table may end d
		if s.inProfile {
			d.pick.Store(pickBuilding) // ... once Pick has returned it (Decision.handOver)
		}
		if err := r.requests.Register(s.req.ID, tableHandle{d}); err != nil {
			d.end(DoneInfo{Err: err}, false) // undo: nothing of this request stays accounted
			return nil, err
		}
	}
	s.committed = true
	s.keepPrompts(d)
	s.commitMode(d) // precise, approximate or blind (approx.go)
	s.traceCommit(d)

	if *r.cfg.Speculative.Enabled && s.total > 0 {
		s.speculate(i)
		r.cluster.Publish(chosen.ID, st.keys) // the other replicas speculate too; nil-safe, never blocks
	}
	if s.promptTokens > 0 {
		r.met.predicted.Observe(float64(d.CachedTokens))
		r.met.prompt.Observe(float64(s.promptTokens))
	}
	if !s.inProfile {
		countFallback(r, d) // a profile's roles: Pick counts the request once
	}
	if s.usedCache {
		r.met.decisions[decisionPrecise].Inc()
	} else {
		r.met.decisions[decisionLoadOnly].Inc()
		r.blind(s)
	}
	return d, nil
}

// countFallback counts in kvroute_router_render_fallbacks_total a routed
// request that could not be tokenized: once per request, when Pick returns
// its Decision or a host's Commit of Match's Selection makes it. A render
// that failed for a request not routed (the filters kept no candidate, the
// host released the Selection), or for a profile's look at the request
// besides its pick (a session's opening), is not a routed request.
func countFallback(r *Router, d *Decision) {
	if d != nil && d.RenderErr != nil {
		r.met.renderFallbacks.Inc()
	}
}

// speculate gives candidate i speculative index entries for the request's
// blocks. Of the prompt whose match the Selection holds, the blocks the
// match found the candidate holding, none of them speculatively, are left
// out: Speculate leaves a confirmed block alone, so looking each up again
// would change nothing (as the match saw the index: a block the engine
// evicted since then gets no speculative entry, and its KV events will say
// when it holds it again). The chosen endpoint of a warm prefix usually
// holds most of the request, so this is most of the speculative insert's
// cost.
func (s *Selection) speculate(i int) {
	r, st := s.r, &s.st
	id := s.eps[i].ID
	for p := 0; p+1 < len(st.bounds); p++ {
		keys := st.keys[st.bounds[p]:st.bounds[p+1]]
		if p == st.matched && i < st.match.Len() && st.match.Speculative(i) == 0 {
			keys = keys[min(st.match.Blocks(i), len(keys)):]
		}
		if len(keys) > 0 {
			r.index.Speculate(id, keys, r.cfg.Speculative.TTL)
		}
	}
}

// Reasons of kvroute_router_cache_blind_total: why a decision was made
// without cache information.
const (
	blindRenderFailed = iota
	blindRenderDisabled
	blindEventsDisabled
	blindPromptEmbeds
	blindRawMedia
	numBlindReasons
)

var blindReasons = [numBlindReasons]string{
	blindRenderFailed:   "render_failed",
	blindRenderDisabled: "render_disabled",
	blindEventsDisabled: "events_disabled",
	blindPromptEmbeds:   "prompt_embeds",
	blindRawMedia:       "raw_media",
}

var blindHints = [numBlindReasons]string{
	blindRenderFailed:   "the request could not be tokenized; check the render endpoints (llm_d_epp_token_producer_render_* metrics)",
	blindRenderDisabled: "rendering is disabled and the request carried no Prompts",
	blindEventsDisabled: "KV events are disabled, so no engine's cache is indexed",
	blindPromptEmbeds:   "the request carries prompt_embeds: the engine keys its blocks by hashes of the embeddings, which the router cannot compute",
	blindRawMedia:       "the prompt's multimodal items are raw media (a token-in request's content_parts): the engine expands their placeholders and keys their blocks by hashes the request does not give; send features (mm_hashes, mm_placeholders) from a render instead",
}

// blindWarnInterval spaces the warnings about cache-blind decisions.
const blindWarnInterval = time.Minute

// warnings rate-limits one warning per reason per blindWarnInterval.
type warnings struct {
	last [numBlindReasons]atomic.Int64 // unix ns of the last warning
}

// blind counts a load-only decision under the reason the router can name,
// and warns once per interval per reason. A load-only decision with none of
// these reasons (nothing cached anywhere yet) is normal and only counted in
// kvroute_router_decisions_total{kind="load_only"}.
func (r *Router) blind(s *Selection) {
	reason := -1
	switch {
	case errors.Is(s.renderErr, errRenderDisabled):
		reason = blindRenderDisabled
	case errors.Is(s.renderErr, errPromptEmbeds):
		reason = blindPromptEmbeds
	case errors.Is(s.renderErr, errRawMedia):
		reason = blindRawMedia
	case s.renderErr != nil:
		reason = blindRenderFailed
	case r.events == nil:
		reason = blindEventsDisabled
	}
	if reason < 0 {
		return
	}
	r.met.blind[reason].Inc()
	now := r.now().UnixNano()
	last := &r.warn.last[reason]
	if l := last.Load(); (l != 0 && now-l < int64(blindWarnInterval)) || !last.CompareAndSwap(l, now) {
		return
	}
	r.log.Warn("kvroute: routed without cache information (counted in kvroute_router_cache_blind_total; this warning repeats at most once a minute)",
		"reason", blindReasons[reason], "hint", blindHints[reason], "request", s.req.ID, "err", s.renderErr)
}

// keepPrompts hands the request's prompts to d when Request.KeepPrompts
// asked for them: rendered ones move out of the pooled scratch, which takes
// in exchange the arrays of an earlier Decision's prompts that d carries
// when it came from the router's pool (Release; the next request renders
// into those, so a host that releases its Decisions renders without
// allocating token arrays); given ones are passed on.
func (s *Selection) keepPrompts(d *Decision) {
	if !s.req.KeepPrompts || s.renderErr != nil || len(s.prompts) == 0 {
		return
	}
	d.Prompts, d.CacheSalt = s.prompts, s.salt
	if len(s.req.Prompts) == 0 {
		s.st.renderRes.Prompts, d.spare = d.spare, nil
		d.ownsPrompts = true
	}
}
