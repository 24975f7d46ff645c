package kvevents

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// tracedFixture is a pool tracing KV events into an in-memory exporter,
// with one stream fed directly (no socket).
type tracedFixture struct {
	t   *testing.T
	p   *Pool
	st  *stream
	exp *tracetest.InMemoryExporter
	tp  *sdktrace.TracerProvider
}

func newTracedFixture(t *testing.T, tr EventTracing, sampler sdktrace.Sampler) *tracedFixture {
	f := &tracedFixture{t: t, exp: tracetest.NewInMemoryExporter()}
	f.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(f.exp), sdktrace.WithSampler(sampler))
	p, err := NewPool(PoolConfig{Tracing: tr}, newPoolIndex(t), Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), TracerProvider: f.tp}})
	require.NoError(t, err)
	f.p = p
	p.mu.Lock()
	f.st = p.newStreamLocked(seqID, poolModel, "")
	p.streams[seqID] = f.st
	p.mu.Unlock()
	return f
}

func (f *tracedFixture) close() {
	require.NoError(f.t, f.p.Close())
	require.NoError(f.t, f.tp.Shutdown(context.Background()))
}

func (f *tracedFixture) publish(from, to uint64) {
	for s := from; s <= to; s++ {
		f.st.receive(s, poolPayload(s), poolModel)
	}
	waitApplied(f.t, f.p, seqID, to)
}

func (f *tracedFixture) spans(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range f.exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, k string) any {
	for _, kv := range s.Attributes {
		if string(kv.Key) == k {
			return kv.Value.AsInterface()
		}
	}
	return nil
}

// Every traced message has events_receive, events_process as its child and
// events_decode under that, with what was applied; a decode error marks
// the decode span.
func TestEventSpansOfEachTracedMessage(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newTracedFixture(t, EventTracing{Enabled: true, SampleRatio: 1}, sdktrace.AlwaysSample())
	defer f.close()
	f.publish(0, 1)
	f.st.receive(2, []byte{0xc1}, poolModel) // never valid msgpack
	f.publish(3, 3)

	recv, proc, dec := f.spans(SpanEventsReceive), f.spans(SpanEventsProcess), f.spans(SpanEventsDecode)
	require.Len(t, recv, 4)
	require.Len(t, proc, 4)
	require.Len(t, dec, 4)
	for i := range 4 {
		require.False(t, recv[i].Parent.IsValid(), "events_receive is a root span")
		require.Equal(t, trace.SpanKindConsumer, recv[i].SpanKind)
		require.Equal(t, seqID, attr(recv[i], string(attrEndpoint)))
		require.Equal(t, int64(i), attr(recv[i], string(attrSeq)))
		require.Equal(t, true, attr(recv[i], string(attrQueued)))
		require.Equal(t, recv[i].SpanContext.SpanID(), proc[i].Parent.SpanID())
		require.Equal(t, recv[i].SpanContext.TraceID(), proc[i].SpanContext.TraceID())
		require.Equal(t, proc[i].SpanContext.SpanID(), dec[i].Parent.SpanID())
		require.NotNil(t, attr(proc[i], string(attrQueueWait)))
	}
	require.Equal(t, true, attr(proc[0], string(attrApplied)))
	require.Equal(t, int64(poolBlocks), attr(proc[0], string(attrStoredBlocks)))
	require.Equal(t, int64(1), attr(dec[0], string(attrEvents)))
	require.Equal(t, codes.Error, dec[2].Status.Code, "the undecodable message's decode span is an error")
	require.Equal(t, false, attr(proc[2], string(attrApplied)))
	require.Equal(t, codes.Unset, dec[3].Status.Code)
}

// The ratio bounds the spans: one message in round(1/ratio) per endpoint,
// starting with the first, and the provider's sampler still applies.
func TestEventSpansAreSampled(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newTracedFixture(t, EventTracing{Enabled: true, SampleRatio: 0.1}, sdktrace.AlwaysSample())
	defer f.close()
	f.publish(0, 94)
	recv := f.spans(SpanEventsReceive)
	require.Len(t, recv, 10)
	for i, s := range recv {
		require.Equal(t, int64(i*10), attr(s, string(attrSeq)))
	}
	require.Len(t, f.spans(SpanEventsProcess), 10)
	require.Len(t, f.spans(SpanEventsDecode), 10)

	never := newTracedFixture(t, EventTracing{Enabled: true, SampleRatio: 1}, sdktrace.NeverSample())
	defer never.close()
	never.publish(0, 9)
	require.Empty(t, never.exp.GetSpans(), "the provider's sampler declines every root span")
}

// Off by default, and off without a provider: no tracer, no spans.
func TestEventSpansOff(t *testing.T) {
	defer leakcheck.Check(t)()
	f := newTracedFixture(t, EventTracing{}, sdktrace.AlwaysSample())
	defer f.close()
	require.Nil(t, f.p.etr)
	f.publish(0, 9)
	require.Empty(t, f.exp.GetSpans())

	p, err := NewPool(PoolConfig{Tracing: EventTracing{Enabled: true}}, newPoolIndex(t), Options{})
	require.NoError(t, err)
	require.Nil(t, p.etr, "enabled without a provider traces nothing")
	require.NoError(t, p.Close())
}

func TestEventTracingConfig(t *testing.T) {
	var c PoolConfig
	require.NoError(t, json.Unmarshal([]byte(`{"tracing":{"enabled":true}}`), &c))
	require.NoError(t, c.Validate())
	require.Equal(t, defaultEventSampleRatio, c.withDefaults().Tracing.SampleRatio)
	require.NoError(t, json.Unmarshal([]byte(`{"tracing":{"enabled":true,"sampleRatio":0.25}}`), &c))
	require.Equal(t, 0.25, c.withDefaults().Tracing.SampleRatio)
	require.Equal(t, uint64(4), newEventTracer(c.withDefaults().Tracing, sdktrace.NewTracerProvider()).period)
	require.Error(t, json.Unmarshal([]byte(`{"tracing":{"enabled":true,"ratio":0.25}}`), &c), "unknown key")
	for _, bad := range []float64{-0.1, 1.5} {
		c := PoolConfig{Tracing: EventTracing{Enabled: true, SampleRatio: bad}}
		require.ErrorContains(t, c.Validate(), "tracing.sampleRatio")
	}
}
