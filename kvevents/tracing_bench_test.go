package kvevents

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// ingestBench is one pool with one stream fed directly on the receiver
// path (stream.receive → worker queue → sequencing → decode → apply), no
// socket, so that what tracing adds is not lost in ZeroMQ's cost.
type ingestBench struct {
	p        *Pool
	st       *stream
	ix       *kvindex.Index
	payloads [][]byte
	seq      uint64
}

func newIngestBench(b *testing.B, tr EventTracing, tp trace.TracerProvider, payloads [][]byte) *ingestBench {
	ix, err := kvindex.New(kvindex.Config{BlockSize: poolBlockSize, SweepInterval: -1}, kvindex.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p, err := NewPool(PoolConfig{Tracing: tr, QueueSize: 4096}, ix, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), TracerProvider: tp}})
	if err != nil {
		b.Fatal(err)
	}
	p.mu.Lock()
	st := p.newStreamLocked(seqID, poolModel, "")
	p.streams[seqID] = st
	p.mu.Unlock()
	b.Cleanup(func() { _ = p.Close(); ix.Close() })
	return &ingestBench{p: p, st: st, ix: ix, payloads: payloads}
}

// run receives n messages and waits until the last is applied.
func (ib *ingestBench) run(b *testing.B, n int) {
	for range n {
		ib.st.receive(ib.seq, ib.payloads[ib.seq%uint64(len(ib.payloads))], poolModel)
		ib.seq++
	}
	last := ib.seq - 1
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s, ok := ib.p.Status(seqID); ok && s.HasApplied && s.Applied >= last {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("stuck below seq %d", last)
		}
		time.Sleep(10 * time.Microsecond)
	}
}

// countingProcessor records every span (the SDK builds it in full) and
// drops it: the cost of recording without an exporter's.
type countingProcessor struct{ ended atomic.Int64 }

func (c *countingProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *countingProcessor) OnEnd(sdktrace.ReadOnlySpan)                     { c.ended.Add(1) }
func (c *countingProcessor) Shutdown(context.Context) error                  { return nil }
func (c *countingProcessor) ForceFlush(context.Context) error                { return nil }

// BenchmarkIngestTracing alternates, in the same run, bursts of messages
// through identical pools: "none" (no provider, tracing not configured:
// every pool before the KV-event spans existed took this path, now through
// the nil checks), "off" (a recording provider given, events.tracing off),
// "default" (on at defaultEventSampleRatio) and "all" (every message
// traced, the unbounded cost the ratio avoids). It reports each one's
// median time per message, their ratios to "none", and allocations per
// message, and checks every message was applied and the spans counted.
func BenchmarkIngestTracing(b *testing.B) {
	const burst = 256
	payloads := make([][]byte, 512)
	for i := range payloads {
		payloads[i] = poolPayload(uint64(i))
	}
	procDef, procAll := &countingProcessor{}, &countingProcessor{}
	tpDef := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(procDef))
	tpAll := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(procAll))
	tpOff := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	names := []string{"none", "off", "default", "all"}
	pools := []*ingestBench{
		newIngestBench(b, EventTracing{}, nil, payloads),
		newIngestBench(b, EventTracing{}, tpOff, payloads),
		newIngestBench(b, EventTracing{Enabled: true}, tpDef, payloads),
		newIngestBench(b, EventTracing{Enabled: true, SampleRatio: 1}, tpAll, payloads),
	}
	allocs := make([]float64, len(pools))
	for i, ib := range pools {
		ib.run(b, burst) // warm up
		allocs[i] = testing.AllocsPerRun(20, func() { ib.run(b, burst) }) / burst
	}
	times := make([][]time.Duration, len(pools))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range pools {
			j := (k + i) % len(pools) // rotate the order
			t0 := time.Now()
			pools[j].run(b, burst)
			times[j] = append(times[j], time.Since(t0)/burst)
		}
	}
	b.StopTimer()
	for _, ib := range pools {
		if got := ib.p.Stats().Applied; got != ib.seq {
			b.Fatalf("applied %d of %d messages", got, ib.seq)
		}
	}
	if procAll.ended.Load() != 3*int64(pools[3].seq) {
		b.Fatalf("all: %d spans for %d messages, want 3 each", procAll.ended.Load(), pools[3].seq)
	}
	if want := 3 * int64((pools[2].seq+99)/100); procDef.ended.Load() != want {
		b.Fatalf("default: %d spans for %d messages, want %d", procDef.ended.Load(), pools[2].seq, want)
	}
	med := make([]time.Duration, len(pools))
	for j := range pools {
		slices.Sort(times[j])
		med[j] = times[j][len(times[j])/2]
		b.ReportMetric(float64(med[j].Nanoseconds()), names[j]+"-p50-ns/msg")
		b.ReportMetric(allocs[j], names[j]+"-allocs/msg")
	}
	for j := 1; j < len(pools); j++ {
		b.ReportMetric(float64(med[j])/float64(med[0]), names[j]+"/none")
	}
	b.ReportMetric(float64(procDef.ended.Load())/float64(pools[2].seq), "default-spans/msg")
}
