package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// The client's traceparent is joined: the gateway's server span is its
// child, the router's pick span the gateway's, and the engine receives a
// traceparent naming the gateway's span in the same trace.
func TestGatewayPropagatesW3CTraceContext(t *testing.T) {
	defer leakcheck.Check(t)()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	u := newUpstream(t)
	defer u.Close()
	rcfg := kvroute.DefaultConfig()
	rcfg.Model = testModel
	rcfg.Events.Enabled = new(false)
	r, err := kvroute.New(context.Background(), rcfg, kvroute.Options{Set: telemetry.Set{TracerProvider: tp}})
	require.NoError(t, err)
	defer r.Close()
	eps := []kvroute.Endpoint{{ID: u.id}}
	require.NoError(t, r.SetEndpoints(eps))
	h, err := New(Config{Model: testModel}, r, Options{Set: telemetry.Set{TracerProvider: tp}})
	require.NoError(t, err)
	defer h.Close()
	h.SetEndpoints(eps)
	gw := httptest.NewServer(h)
	defer gw.Close()

	clientCtx, client := tp.Tracer("client").Start(context.Background(), "client")
	req, err := http.NewRequest(http.MethodPost, gw.URL+"/v1/completions", strings.NewReader(completionsBody("trace me please", false)))
	require.NoError(t, err)
	propagation.TraceContext{}.Inject(clientCtx, propagation.HeaderCarrier(req.Header))
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	client.End()

	_, headers := u.received()
	require.Len(t, headers, 1)
	upstream := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(headers[0])))
	require.Equal(t, client.SpanContext().TraceID(), upstream.TraceID())

	byName := map[string]tracetest.SpanStub{}
	require.Eventually(t, func() bool {
		for _, s := range exp.GetSpans() {
			byName[s.Name] = s
		}
		_, ok := byName["gateway /v1/completions"]
		return ok
	}, wait, time.Millisecond)
	gws := byName["gateway /v1/completions"]
	require.Equal(t, client.SpanContext().SpanID(), gws.Parent.SpanID())
	require.Equal(t, gws.SpanContext.SpanID(), upstream.SpanID(), "the engine sees the gateway's span as its parent")
	require.Equal(t, gws.SpanContext.SpanID(), byName["pick"].Parent.SpanID())
	require.Equal(t, byName["pick"].SpanContext.SpanID(), byName["render"].Parent.SpanID(), "render attempts nest under pick")
}

// Without a provider the client's traceparent reaches the engine unchanged.
func TestGatewayPassesTraceparentWithoutTracing(t *testing.T) {
	defer leakcheck.Check(t)()
	h := newHarness(t, 1, Config{})
	defer h.close()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, err := http.NewRequest(http.MethodPost, h.gw.URL+"/v1/completions", strings.NewReader(completionsBody("x", false)))
	require.NoError(t, err)
	req.Header.Set("Traceparent", tp)
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	_, headers := h.ups[0].received()
	require.Equal(t, tp, headers[0].Get("Traceparent"))
}
