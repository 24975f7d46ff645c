package kvroute

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kvroute/kvroute/render"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kvroute/kvroute/telemetry"
)

// tracedRouter returns a router tracing into an in-memory exporter.
func tracedRouter(t *testing.T) (*Router, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return testRouter(t, nil, Options{Set: telemetry.Set{TracerProvider: tp}}), exp
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestPickSpansAreChildrenOfPickWithTheirAttributes(t *testing.T) {
	r, exp := tracedRouter(t)
	eps := endpoints(3)
	p := prompt(7, 256)
	engineStores(t, r.Index(), eps[1].ID, p, 100)

	d := pick(t, r, p, eps)
	require.Equal(t, eps[1].ID, d.Endpoint.ID)
	d.Done(DoneInfo{})

	spans := exp.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	require.Len(t, spans, 5, "pick, keys, index_lookup, filter, score")
	root := byName[spanPick]
	require.False(t, root.Parent.IsValid(), "pick is the root when the caller has no span")
	for _, name := range []string{spanKeys, spanIndexLookup, spanFilter, spanScore} {
		s, ok := byName[name]
		require.True(t, ok, name)
		require.Equal(t, root.SpanContext.SpanID(), s.Parent.SpanID(), "%s is a child of pick", name)
		require.Equal(t, root.SpanContext.TraceID(), s.SpanContext.TraceID())
	}
	lk := attrs(byName[spanIndexLookup])
	require.EqualValues(t, 4, lk[attrBlocks].AsInt64())
	require.EqualValues(t, 3, lk[attrCandidates].AsInt64())
	require.EqualValues(t, 4, lk[attrBestMatch].AsInt64())
	require.Equal(t, eps[1].ID, lk[attrBestEndpoint].AsString())
	require.Equal(t, "sticky", attrs(byName[spanFilter])[attrOutcome].AsString())
	require.Equal(t, eps[1].ID, attrs(byName[spanScore])[attrEndpoint].AsString())
	pa := attrs(root)
	require.Equal(t, eps[1].ID, pa[attrEndpoint].AsString())
	require.EqualValues(t, 256, pa[attrCachedTokens].AsInt64())
	require.EqualValues(t, 256, pa[attrPromptTokens].AsInt64())
	require.EqualValues(t, 256, attrs(byName[spanKeys])[attrPromptTokens].AsInt64())
	require.Equal(t, "blind", pa[attrCacheMode].AsString(), "KV events are off and no approximate index: the index was fed by hand")
}

func TestPickSpanJoinsTheCallersTrace(t *testing.T) {
	r, exp := tracedRouter(t)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, parent := tp.Tracer("gateway").Start(context.Background(), "request")
	d, err := r.Pick(ctx, &Request{ID: "r1", Prompts: []render.Prompt{{TokenIDs: prompt(1, 128)}}}, endpoints(2))
	require.NoError(t, err)
	d.Done(DoneInfo{})
	parent.End()
	var pk tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == spanPick {
			pk = s
		}
	}
	require.Equal(t, parent.SpanContext().SpanID(), pk.Parent.SpanID())
	require.Equal(t, "r1", attrs(pk)[attrRequestID].AsString())
	require.Equal(t, "no_match", attrs(pk)[attrOutcome].AsString())
}

func TestStagedSelectionEndsPickSpanAtRelease(t *testing.T) {
	r, exp := tracedRouter(t)
	s, err := r.Match(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: prompt(1, 128)}}}, endpoints(2))
	require.NoError(t, err)
	for _, sp := range exp.GetSpans() {
		require.NotEqual(t, spanPick, sp.Name, "pick is open until Release")
	}
	d, err := s.Commit(0) // no filter, no score: no spans for them
	require.NoError(t, err)
	s.Release()
	d.Done(DoneInfo{})
	names := map[string]int{}
	for _, sp := range exp.GetSpans() {
		names[sp.Name]++
	}
	require.Equal(t, map[string]int{spanPick: 1, spanKeys: 1, spanIndexLookup: 1}, names)
}

func TestPickSpanRecordsCanceledRender(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	r := testRouter(t, func(c *Config) { c.DisableRender = false; c.Render.URL = "http://127.0.0.1:1" }, Options{Set: telemetry.Set{TracerProvider: tp}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, err := r.Pick(ctx, &Request{API: render.APICompletions, Body: []byte(`{"prompt":"x"}`)}, endpoints(1))
	require.Error(t, err)
	// Pick refuses a finished context before it opens a span.
	require.Empty(t, exp.GetSpans())
}

// TestPickWithoutTracingAllocatesAsBefore holds tracing off to no extra
// allocations: the staged Pick with a nil TracerProvider allocates no more
// than the single-function Pick, which has no tracing code (both allocate
// once, the Decision, without the race detector).
func TestPickWithoutTracingAllocatesAsBefore(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random: allocation counts vary")
	}
	r := testRouter(t, nil, Options{})
	eps := endpoints(16)
	p := prompt(3, 1024)
	engineStores(t, r.Index(), eps[2].ID, p, 1)
	req := &Request{Prompts: []render.Prompt{{TokenIDs: p}}}
	ctx := context.Background()
	run := func(f func(context.Context, *Request, []Endpoint) (*Decision, error)) float64 {
		return testing.AllocsPerRun(200, func() {
			d, err := f(ctx, req, eps)
			if err != nil {
				t.Fatal(err)
			}
			d.Done(DoneInfo{})
		})
	}
	legacy, staged := run(r.legacyPick), run(r.Pick)
	require.LessOrEqual(t, staged, legacy, "staged %v, monolithic %v allocations per pick", staged, legacy)
	require.Equal(t, 1.0, staged, "the Decision only")
}

// A client's request ID, as long as its host's header limit allows, is cut
// at a UTF-8 boundary for the pick span.
func TestPickSpanClipsTheRequestID(t *testing.T) {
	r, exp := tracedRouter(t)
	id := strings.Repeat("é", 5000)
	d, err := r.Pick(context.Background(), &Request{ID: id, Prompts: []render.Prompt{{TokenIDs: prompt(1, 128)}}}, endpoints(2))
	if err == nil {
		d.Done(DoneInfo{})
	}
	var got string
	for _, s := range exp.GetSpans() {
		if s.Name == spanPick {
			got = attrs(s)[attrRequestID].AsString()
		}
	}
	require.NotEmpty(t, got)
	require.LessOrEqual(t, len(got), 256)
	require.True(t, utf8.ValidString(got))
	require.True(t, strings.HasPrefix(id, got))
}
