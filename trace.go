package kvroute

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvroute/kvroute/internal/recent"
)

// tracerName is the instrumentation scope of the router's spans.
const tracerName = "github.com/kvroute/kvroute"

// Span names of a traced Pick. "pick" spans one request from Match to
// Release; "render" (one per HTTP attempt, from the render client), "keys",
// "index_lookup", "filter" and "score" are its children.
const (
	spanPick        = "pick"
	spanKeys        = "keys"
	spanIndexLookup = "index_lookup"
	spanFilter      = "filter"
	spanScore       = "score"
)

// Span attribute keys of the router's spans.
const (
	attrRequestID      = attribute.Key("kvroute.request.id")
	attrCandidates     = attribute.Key("kvroute.candidates")
	attrPromptTokens   = attribute.Key("kvroute.prompt_tokens")
	attrBlocks         = attribute.Key("kvroute.blocks")
	attrBestMatch      = attribute.Key("kvroute.best_match_blocks")
	attrBestEndpoint   = attribute.Key("kvroute.best_match_endpoint")
	attrOutcome        = attribute.Key("kvroute.filter.outcome")
	attrKept           = attribute.Key("kvroute.filter.kept")
	attrEndpoint       = attribute.Key("kvroute.endpoint")
	attrScore          = attribute.Key("kvroute.score")
	attrCachedTokens   = attribute.Key("kvroute.predicted_cached_tokens")
	attrUncachedTokens = attribute.Key("kvroute.uncached_tokens")
	attrUsedCache      = attribute.Key("kvroute.used_cache")
	attrCacheMode      = attribute.Key("kvroute.cache_mode")
)

// startPick opens the request's "pick" span when the router traces, and
// returns the context its children start from. Without a tracer it returns
// ctx unchanged and allocates nothing.
func (s *Selection) startPick(ctx context.Context) context.Context {
	t := s.r.tracer
	if t == nil {
		return ctx
	}
	ctx, s.span = t.Start(ctx, spanPick, trace.WithAttributes(
		attrRequestID.String(clipRequestID(s.req.ID)),
		attrCandidates.Int(len(s.eps)),
	))
	s.tctx = ctx
	return ctx
}

// clipRequestID cuts a request's ID (a client's X-Request-Id, as long as
// the host's header limit allows) to 256 bytes for the pick span: the
// exporter holds every span it has not sent yet.
func clipRequestID(id string) string {
	id, _ = recent.Clip(id)
	return id
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
	sp.SetAttributes(attrPromptTokens.Int(s.promptTokens), attrBlocks.Int(s.total))
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
	sp.SetAttributes(attrBlocks.Int(s.total), attrCandidates.Int(len(s.eps)),
		attrBestMatch.Int(best), attrBestEndpoint.String(bestID), attrUsedCache.Bool(s.usedCache))
	sp.End()
}

// traceFilter records the filter stage's outcome.
func (s *Selection) traceFilter(sp trace.Span) {
	sp.SetAttributes(attrOutcome.String(s.outcome.String()), attrKept.Int(len(s.st.pass)))
	sp.End()
}

// traceScore records the scoring stage's winner.
func (s *Selection) traceScore(sp trace.Span) {
	if s.best >= 0 {
		sp.SetAttributes(attrEndpoint.String(s.eps[s.best].ID), attrScore.Float64(s.bestScore))
	}
	sp.End()
}

// traceCommit puts the decision on the pick span.
func (s *Selection) traceCommit(d *Decision) {
	if s.span == nil {
		return
	}
	s.span.SetAttributes(attrEndpoint.String(d.Endpoint.ID), attrOutcome.String(d.Outcome.String()),
		attrPromptTokens.Int(d.PromptTokens), attrCachedTokens.Int(d.CachedTokens),
		attrUncachedTokens.Int64(d.UncachedTokens), attrUsedCache.Bool(d.UsedCache), attrCacheMode.String(d.CacheMode.String()))
}
