package kvroute

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the router's spans.
const TracerName = "github.com/kvroute/kvroute"

// Span names of a traced Pick. "pick" spans one request from Match to
// Release; "render" (one per HTTP attempt, from the render client), "keys",
// "index_lookup", "filter" and "score" are its children.
const (
	SpanPick        = "pick"
	SpanKeys        = "keys"
	SpanIndexLookup = "index_lookup"
	SpanFilter      = "filter"
	SpanScore       = "score"
)

// Span attribute keys of the router's spans.
const (
	AttrRequestID      = attribute.Key("kvroute.request.id")
	AttrCandidates     = attribute.Key("kvroute.candidates")
	AttrPromptTokens   = attribute.Key("kvroute.prompt_tokens")
	AttrBlocks         = attribute.Key("kvroute.blocks")
	AttrBestMatch      = attribute.Key("kvroute.best_match_blocks")
	AttrBestEndpoint   = attribute.Key("kvroute.best_match_endpoint")
	AttrOutcome        = attribute.Key("kvroute.filter.outcome")
	AttrKept           = attribute.Key("kvroute.filter.kept")
	AttrEndpoint       = attribute.Key("kvroute.endpoint")
	AttrScore          = attribute.Key("kvroute.score")
	AttrCachedTokens   = attribute.Key("kvroute.predicted_cached_tokens")
	AttrUncachedTokens = attribute.Key("kvroute.uncached_tokens")
	AttrUsedCache      = attribute.Key("kvroute.used_cache")
)

// startPick opens the request's "pick" span when the router traces, and
// returns the context its children start from. Without a tracer it returns
// ctx unchanged and allocates nothing.
func (s *Selection) startPick(ctx context.Context) context.Context {
	t := s.r.tracer
	if t == nil {
		return ctx
	}
	ctx, s.span = t.Start(ctx, SpanPick, trace.WithAttributes(
		AttrRequestID.String(s.req.ID),
		AttrCandidates.Int(len(s.eps)),
	))
	s.tctx = ctx
	return ctx
}

// child starts a child span of the pick span; nil when the router does not
// trace.
func (s *Selection) child(name string) trace.Span {
	if s.span == nil {
		return nil
	}
	_, sp := s.r.tracer.Start(s.tctx, name)
	return sp
}

// endPick ends the pick span (at Release), recording err when Match failed.
func (s *Selection) endPick(err error) {
	if s.span == nil {
		return
	}
	if err != nil {
		s.span.RecordError(err)
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
	s.span, s.tctx = nil, nil
}

// traceKeys records the keys stage.
func (s *Selection) traceKeys(sp trace.Span) {
	sp.SetAttributes(AttrPromptTokens.Int(s.promptTokens), AttrBlocks.Int(s.total))
	if s.renderErr != nil {
		sp.SetAttributes(attribute.String("kvroute.render_error", s.renderErr.Error()))
	}
	sp.End()
}

// traceLookup records the index-lookup stage: blocks looked up, candidates,
// and the best match (most contiguous blocks).
func (s *Selection) traceLookup(sp trace.Span) {
	best, bestID := 0, ""
	for i, b := range s.st.blocks {
		if b > best {
			best, bestID = b, s.eps[i].ID
		}
	}
	sp.SetAttributes(AttrBlocks.Int(s.total), AttrCandidates.Int(len(s.eps)),
		AttrBestMatch.Int(best), AttrBestEndpoint.String(bestID), AttrUsedCache.Bool(s.usedCache))
	sp.End()
}

// traceFilter records the filter stage's outcome.
func (s *Selection) traceFilter(sp trace.Span) {
	sp.SetAttributes(AttrOutcome.String(s.outcome.String()), AttrKept.Int(len(s.st.pass)))
	sp.End()
}

// traceScore records the scoring stage's winner.
func (s *Selection) traceScore(sp trace.Span) {
	if s.best >= 0 {
		sp.SetAttributes(AttrEndpoint.String(s.eps[s.best].ID), AttrScore.Float64(s.bestScore))
	}
	sp.End()
}

// traceCommit puts the decision on the pick span.
func (s *Selection) traceCommit(d *Decision) {
	if s.span == nil {
		return
	}
	s.span.SetAttributes(AttrEndpoint.String(d.Endpoint.ID), AttrOutcome.String(d.Outcome.String()),
		AttrPromptTokens.Int(d.PromptTokens), AttrCachedTokens.Int(d.CachedTokens),
		AttrUncachedTokens.Int64(d.UncachedTokens), AttrUsedCache.Bool(d.UsedCache))
}
