package extproc

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/kvroute/kvroute/internal/recent"
)

// TracerName is the instrumentation scope of the picker's spans.
const TracerName = "github.com/kvroute/kvroute/contrib/extproc"

// SpanRoute is the name of the span a tracing picker opens for each routed
// stream: from the pick (its endpoints chosen, the Router's own "pick" span
// a child of it) to the stream's end, so that it also covers the response
// Envoy reports back. Its attributes name the request path, the model, the
// endpoints sent to Envoy, the prefill endpoint of a split request, the
// pick's outcome, prompt and cached tokens, the endpoint Envoy reported as
// having served, and the stream's result (the kvroute_extproc_requests_total
// result label); the path, the model and the served endpoint are cut to 256
// bytes, as the status page cuts them.
const SpanRoute = "extproc route"

// Attribute keys of SpanRoute beside the Router's own (kvroute.endpoint and
// the rest).
const (
	attrPath      = attribute.Key("url.path")
	attrModel     = attribute.Key("kvroute.model")
	attrEndpoints = attribute.Key("kvroute.extproc.endpoints")
	attrPrefill   = attribute.Key("kvroute.extproc.prefill_endpoint")
	attrServed    = attribute.Key("kvroute.extproc.served_endpoint")
	attrResult    = attribute.Key("kvroute.extproc.result")
	attrOutcome   = attribute.Key("kvroute.filter.outcome")
	attrPrompt    = attribute.Key("kvroute.prompt_tokens")
	attrCached    = attribute.Key("kvroute.predicted_cached_tokens")
)

// propagator reads W3C trace context (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// mdCarrier reads trace context from a gRPC stream's incoming metadata,
// where Envoy puts its ext_proc call's span when Envoy traces.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// parentContext returns the stream's context joined to the trace the
// request belongs to: Envoy's span for the ext_proc call when the stream's
// metadata carries one, else the HTTP request's own traceparent header (a
// client's trace that Envoy forwarded without tracing itself), else none.
func (st *streamState) parentContext() context.Context {
	ctx := st.stream.Context()
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if c := propagator.Extract(ctx, mdCarrier(md)); trace.SpanContextFromContext(c).IsValid() {
			return c
		}
	}
	if st.header != nil {
		return propagator.Extract(ctx, propagation.HeaderCarrier(st.header))
	}
	return ctx
}

// startSpan opens the stream's SpanRoute when the picker traces; the pick
// then runs in st.ctx. Without a tracer it does nothing and allocates
// nothing.
func (st *streamState) startSpan() {
	t := st.srv.tracer
	if t == nil {
		return
	}
	st.ctx, st.span = t.Start(st.parentContext(), SpanRoute, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attrPath.String(clipText(st.path))))
}

// clipText cuts a text from the client or Envoy to the status page's
// length (recent.MaxText) for a span: a model may be as long as the body
// limit, and the exporter holds every span it has not sent yet.
func clipText(s string) string {
	s, _ = recent.Clip(s)
	return s
}

// pickContext is the context the pick runs in: the span's when tracing.
func (st *streamState) pickContext() context.Context {
	if st.ctx != nil {
		return st.ctx
	}
	return st.stream.Context()
}

// spanAttributes returns what became of the request, for the span; nil
// without a span.
func (st *streamState) spanAttributes() []attribute.KeyValue {
	if st.span == nil {
		return nil
	}
	attrs := []attribute.KeyValue{attrResult.String(st.result)}
	if st.model != "" {
		attrs = append(attrs, attrModel.String(clipText(st.model)))
	}
	if len(st.list) > 0 {
		attrs = append(attrs, attrEndpoints.String(strings.Join(st.list, ",")))
	}
	if st.served != "" {
		attrs = append(attrs, attrServed.String(clipText(st.served)))
	}
	if d := st.decision; d != nil {
		attrs = append(attrs, attrOutcome.String(d.Outcome.String()), attrPrompt.Int(d.PromptTokens), attrCached.Int(d.CachedTokens))
		if len(d.Roles) > 0 {
			attrs = append(attrs, attrPrefill.String(d.Roles[0].Endpoint.ID))
		}
	}
	return attrs
}

// endSpan ends the stream's span with attrs (spanAttributes'); err is the
// stream's error (nil when it ended normally).
func (st *streamState) endSpan(attrs []attribute.KeyValue, err error) {
	sp := st.span
	if sp == nil {
		return
	}
	st.span, st.ctx = nil, nil
	sp.SetAttributes(attrs...)
	if err != nil && !errors.Is(err, errStop) {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}
