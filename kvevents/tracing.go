package kvevents

import (
	"context"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// tracerName is the instrumentation scope of the KV-event spans.
const tracerName = "github.com/kvroute/kvroute/kvevents"

// Span names of a traced KV-event message, as llm-d's router names them.
// "events_receive" spans the receipt of one live message on its
// subscription (sequence checks and queueing); "events_process", its child,
// spans the message's handling on the worker that applies it (sequencing,
// decoding, applying to the index); "events_decode", a child of
// events_process, spans the msgpack decoding alone.
const (
	SpanEventsReceive = "events_receive"
	SpanEventsProcess = "events_process"
	SpanEventsDecode  = "events_decode"
)

// Span attribute keys of the KV-event spans.
const (
	attrEndpoint      = attribute.Key("kvroute.endpoint")
	attrSeq           = attribute.Key("kvroute.events.seq")
	attrPayloadBytes  = attribute.Key("kvroute.events.payload_bytes")
	attrQueued        = attribute.Key("kvroute.events.queued")
	attrQueueWait     = attribute.Key("kvroute.events.queue_wait_us")
	attrApplied       = attribute.Key("kvroute.events.applied")
	attrEvents        = attribute.Key("kvroute.events.count")
	attrStoredBlocks  = attribute.Key("kvroute.events.stored_blocks")
	attrRemovedBlocks = attribute.Key("kvroute.events.removed_blocks")
	attrDropped       = attribute.Key("kvroute.events.dropped")
)

// defaultEventSampleRatio is the share of live messages traced when
// EventTracing is enabled without a ratio: one message in 100 per endpoint.
// Engines publish a batch per scheduler step, many times the request rate,
// so tracing every message would cost more than the requests' own spans.
const defaultEventSampleRatio = 0.01

// EventTracing configures the KV-event spans (SpanEventsReceive,
// SpanEventsProcess, SpanEventsDecode). Off by default; on, it needs
// Options.TracerProvider, and without one it costs nothing either.
type EventTracing struct {
	// Enabled turns the KV-event spans on.
	Enabled bool `json:"enabled"`
	// SampleRatio is the share of each endpoint's live messages traced, in
	// (0, 1] (default 0.01 when Enabled). Sampling is by count, one message
	// in round(1/SampleRatio) per endpoint starting with its first, so the
	// cost is bounded at any event rate and a test can count the spans. The
	// provider's own sampler still decides on each of those root spans.
	SampleRatio float64 `json:"sampleRatio"`
}

// validate rejects a ratio outside [0, 1].
func (c EventTracing) validate() error {
	if math.IsNaN(c.SampleRatio) || c.SampleRatio < 0 || c.SampleRatio > 1 {
		return fmt.Errorf("kvevents: pool config: tracing.sampleRatio must be in [0, 1], got %v", c.SampleRatio)
	}
	return nil
}

// withDefaults fills the ratio of an enabled configuration.
func (c EventTracing) withDefaults() EventTracing {
	if c.Enabled && c.SampleRatio == 0 {
		c.SampleRatio = defaultEventSampleRatio
	}
	return c
}

// eventTracer starts the spans of sampled messages; a Pool has none (nil)
// unless tracing is enabled and a provider is given.
type eventTracer struct {
	tracer trace.Tracer
	period uint64 // trace one message in period per endpoint
}

func newEventTracer(cfg EventTracing, tp trace.TracerProvider) *eventTracer {
	if !cfg.Enabled || tp == nil || cfg.SampleRatio <= 0 {
		return nil
	}
	return &eventTracer{tracer: tp.Tracer(tracerName), period: uint64(max(1, math.Round(1/cfg.SampleRatio)))}
}

// eventTraceState is a stream's tracing state.
type eventTraceState struct {
	n   uint64     // live messages since the last sampled one; receiver-only
	cur *eventSpan // the message being handled, when sampled; guarded by stream.mu
}

// eventSpan carries one sampled message's trace from its receiver to the
// worker that handles it.
type eventSpan struct {
	t      *eventTracer
	seq    uint64
	recvAt time.Time
	ctx    context.Context // carries the events_receive span
	rsp    trace.Span
	pctx   context.Context // carries the events_process span
	psp    trace.Span
	dsp    trace.Span
	result ApplyResult
	events int
	done   bool // decoded and applied to the index
}

// traceReceive decides whether the live message seq is traced and, if so,
// starts its events_receive span. It runs on the receiver goroutine and
// returns nil, at the cost of one comparison, when the pool does not trace.
func (st *stream) traceReceive(seq uint64, payload []byte) *eventSpan {
	t := st.p.etr
	if t == nil {
		return nil
	}
	st.et.n++
	if st.et.n != 1 && st.et.n <= t.period {
		return nil
	}
	st.et.n = 1
	ctx, sp := t.tracer.Start(context.Background(), SpanEventsReceive, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attrEndpoint.String(st.id), attrSeq.Int64(int64(seq)), attrPayloadBytes.Int(len(payload))))
	if !sp.IsRecording() {
		sp.End()
		return nil // the provider's sampler said no
	}
	return &eventSpan{t: t, seq: seq, recvAt: time.Now(), ctx: ctx, rsp: sp}
}

// endReceive ends the events_receive span once the message is queued for
// its worker (or dropped because the queue was full).
func (e *eventSpan) endReceive(queued bool) {
	if e == nil {
		return
	}
	e.rsp.SetAttributes(attrQueued.Bool(queued))
	if !queued {
		e.rsp.SetStatus(codes.Error, "worker queue full")
	}
	e.rsp.End()
}

// beginProcessLocked starts the events_process span of a sampled message as
// its worker takes it, and makes it the stream's current trace.
func (st *stream) beginProcessLocked(e *eventSpan) {
	e.pctx, e.psp = e.t.tracer.Start(e.ctx, SpanEventsProcess, trace.WithAttributes(
		attrEndpoint.String(st.id), attrSeq.Int64(int64(e.seq)), attrQueueWait.Int64(time.Since(e.recvAt).Microseconds())))
	st.et.cur = e
}

// endProcessLocked ends the current events_process span.
func (st *stream) endProcessLocked() {
	e := st.et.cur
	st.et.cur = nil
	e.psp.SetAttributes(attrApplied.Bool(e.done))
	if e.done {
		r := e.result
		e.psp.SetAttributes(attrEvents.Int(e.events), attrStoredBlocks.Int(r.StoredBlocks),
			attrRemovedBlocks.Int(r.RemovedBlocks+r.ClearedBlocks), attrDropped.Int(r.Dropped))
	}
	e.psp.End()
}

// tracingLocked returns the current trace when it is message seq's (a handling
// may apply messages that waited, untraced, before the traced one).
func (st *stream) tracingLocked(seq uint64) *eventSpan {
	if e := st.et.cur; e != nil && e.seq == seq {
		return e
	}
	return nil
}

// startDecode starts the events_decode span.
func (e *eventSpan) startDecode() {
	if e == nil {
		return
	}
	_, e.dsp = e.t.tracer.Start(e.pctx, SpanEventsDecode)
}

// endDecode ends the events_decode span with the decoder's outcome.
func (e *eventSpan) endDecode(err error, b *wire.Batch) {
	if e == nil {
		return
	}
	if err != nil {
		e.dsp.RecordError(err)
		e.dsp.SetStatus(codes.Error, "decode error")
	} else {
		e.events = len(b.Events)
		e.dsp.SetAttributes(attrEvents.Int(e.events))
	}
	e.dsp.End()
}

// applied records what applying the message did.
func (e *eventSpan) applied(r ApplyResult) {
	if e == nil {
		return
	}
	e.result, e.done = r, true
}
