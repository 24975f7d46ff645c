package gateway

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// propagator reads and writes W3C trace context (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// startSpan joins the client's trace context and, when the handler traces,
// opens the request's server span; r carries the result. end ends the span.
func (h *Handler) startSpan(r *http.Request) (*http.Request, func()) {
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	if h.tracer == nil {
		if ctx == r.Context() {
			return r, noEnd // no traceparent: no copy of the request
		}
		return r.WithContext(ctx), noEnd
	}
	ctx, sp := h.tracer.Start(ctx, "gateway "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
	return r.WithContext(ctx), func() { sp.End() }
}

func noEnd() {}
