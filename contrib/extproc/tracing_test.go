package extproc

import (
	"context"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/metadata"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// Envoy's and a client's W3C trace contexts: the first as Envoy puts it on
// the ext_proc call's metadata, the second as an HTTP request header.
const (
	envoyTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	envoySpanID  = "00f067aa0ba902b7"
	clientTrace  = "0af7651916cd43dd8448eb211c80319c"
	clientSpanID = "b7ad6b7169203331"
)

// tracedTurn sends one completion through the picker, with traceparent
// values on the stream's metadata (md) and among the request's headers
// (hdr), either empty for none, and plays the response back.
func tracedTurn(t *testing.T, h *harness, md, hdr string) {
	t.Helper()
	ctx := ctxT(t)
	if md != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", md)
	}
	st, err := h.client.Process(ctx)
	require.NoError(t, err)
	hdrs := envoyHeaders("/v1/completions", false, nil)
	if hdr != "" {
		hs := hdrs.GetRequestHeaders().GetHeaders()
		hs.Headers = append(hs.Headers, &corev3.HeaderValue{Key: "traceparent", RawValue: []byte(hdr)})
	}
	require.NoError(t, st.Send(hdrs))
	require.NoError(t, st.Send(bodyChunk(completionsBody(prompt(1, 64, "traced"), false), true)))
	hr, err := st.Recv()
	require.NoError(t, err)
	to := strings.Split(setHeader(hr.GetRequestHeaders().GetResponse().GetHeaderMutation(), DefaultDestinationHeader), ",")[0]
	_, err = st.Recv() // the body's answer
	require.NoError(t, err)
	require.NoError(t, st.Send(respHeaders(to, false)))
	_, err = st.Recv()
	require.NoError(t, err)
	require.NoError(t, st.Send(respBody("{}", true)))
	_, err = st.Recv()
	require.NoError(t, err)
	drain(t, st)
}

// A picker given a TracerProvider traces each routed stream as SpanRoute:
// joined to Envoy's span on the stream's metadata when there is one (over
// the request's own traceparent), else to the request's traceparent, else
// a new trace; the Router's "pick" span is its child and ends first; the
// span names the endpoint sent to Envoy, the one that served and the
// result.
func TestPickerTracesEachRoutedStream(t *testing.T) {
	defer leakcheck.Check(t)()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
	h := newHarnessOpts(t, Config{}, harnessOpts{tp: tp}, engineOpts{})
	defer h.close()

	tracedTurn(t, h, "00-"+envoyTraceID+"-"+envoySpanID+"-01", "00-"+clientTrace+"-"+clientSpanID+"-01")
	tracedTurn(t, h, "", "00-"+clientTrace+"-"+clientSpanID+"-01")
	tracedTurn(t, h, "", "")
	h.idle() // every decision released: the pick spans ended

	var routes, picks []sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		switch sp.Name() {
		case SpanRoute:
			routes = append(routes, sp)
		case "pick":
			picks = append(picks, sp)
		}
	}
	require.Len(t, routes, 3)
	require.Len(t, picks, 3)
	parents := []struct{ trace, span string }{{envoyTraceID, envoySpanID}, {clientTrace, clientSpanID}, {"", ""}}
	for i, r := range routes {
		if p := parents[i]; p.trace != "" {
			require.Equal(t, p.trace, r.SpanContext().TraceID().String(), "route %d joins its caller's trace", i)
			require.Equal(t, p.span, r.Parent().SpanID().String())
		} else {
			require.False(t, r.Parent().IsValid(), "a new trace")
		}
		pick := picks[i]
		require.Equal(t, r.SpanContext().SpanID(), pick.Parent().SpanID(), "the router's pick span is the route's child")
		require.False(t, pick.EndTime().After(r.EndTime()), "the pick span ends (at the release) before the route span")
		attrs := map[string]string{}
		for _, kv := range r.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		require.Equal(t, resultRouted, attrs[string(attrResult)])
		require.Equal(t, h.engines[0].id, attrs[string(attrEndpoints)])
		require.Equal(t, h.engines[0].id, attrs[string(attrServed)])
		require.Equal(t, "/v1/completions", attrs[string(attrPath)])
		require.NotEmpty(t, attrs[string(attrPrompt)])
	}
}

// The span's texts from the client (the path, and the body's model, which
// may be as long as the body limit) are cut to the status page's length, so
// that a client whose trace is sampled cannot park megabytes in every span
// the exporter holds.
func TestPickerSpanClipsTheClientsTexts(t *testing.T) {
	defer leakcheck.Check(t)()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
	h := newHarnessOpts(t, Config{}, harnessOpts{tp: tp}, engineOpts{})
	defer h.close()

	long := strings.Repeat("m", 1<<20)
	st, err := h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/v1/completions", false, nil)))
	require.NoError(t, st.Send(bodyChunk(`{"model":"`+long+`","prompt":"x"}`, true)))
	drain(t, st)
	st, err = h.client.Process(ctxT(t))
	require.NoError(t, err)
	require.NoError(t, st.Send(envoyHeaders("/"+strings.Repeat("p", 8<<10), true, nil)))
	drain(t, st)
	h.idle()
	var n int
	for _, sp := range rec.Ended() {
		if sp.Name() != SpanRoute {
			continue
		}
		n++
		for _, a := range sp.Attributes() {
			require.LessOrEqual(t, len(a.Value.String()), 256, "attribute %s", a.Key)
		}
	}
	require.Equal(t, 2, n)
}
