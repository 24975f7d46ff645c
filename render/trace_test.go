package render

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kvroute/kvroute/telemetry"
)

// A retried render is two "render" spans under the caller's span: the
// failed attempt with its status and reason, then the retry.
func TestRenderSpanPerAttemptWithRetry(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	bad, good := newFakeVLLM(t, "a"), newFakeVLLM(t, "b")
	bad.on("/v1/completions/render", status(503))
	c, err := New(DefaultConfig(), Options{Set: telemetry.Set{TracerProvider: tp}})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetEndpoints([]Endpoint{{ID: "a", URL: bad.URL}, {ID: "b", URL: good.URL}}))

	ctx, parent := tp.Tracer("test").Start(context.Background(), "pick")
	res, err := c.Render(ctx, completions("hello"))
	require.NoError(t, err)
	parent.End()
	var spans []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == SpanRender {
			spans = append(spans, s)
		}
	}
	require.Len(t, spans, 2)
	get := func(s tracetest.SpanStub, k attribute.Key) attribute.Value {
		for _, kv := range s.Attributes {
			if kv.Key == k {
				return kv.Value
			}
		}
		return attribute.Value{}
	}
	first, second := spans[0], spans[1]
	require.Equal(t, "a", get(first, AttrEndpoint).AsString())
	require.EqualValues(t, 503, get(first, AttrStatus).AsInt64())
	require.Equal(t, "status", get(first, AttrReason).AsString())
	require.False(t, get(first, AttrRetry).AsBool())
	require.Equal(t, codes.Error, first.Status.Code)
	require.Equal(t, "b", get(second, AttrEndpoint).AsString())
	require.True(t, get(second, AttrRetry).AsBool())
	require.EqualValues(t, 2, get(second, AttrAttempt).AsInt64())
	require.Equal(t, codes.Ok, second.Status.Code)
	require.EqualValues(t, len(res.Prompts[0].TokenIDs), get(second, AttrTokens).AsInt64())
	for _, s := range spans {
		require.Equal(t, parent.SpanContext().SpanID(), s.Parent.SpanID())
	}
}

// Without a provider the client starts no spans.
func TestRenderWithoutTracerProvider(t *testing.T) {
	c := newTestClient(t, nil, newFakeVLLM(t, "a"))
	require.Nil(t, c.tracer)
	_, err := c.Render(context.Background(), completions("hello"))
	require.NoError(t, err)
}
