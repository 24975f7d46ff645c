package kvroute

import (
	"context"
	"testing"
	"time"

	"github.com/kvroute/kvroute/render"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/kvroute/kvroute/telemetry"
)

// BenchmarkPickTracing alternates, in the same run, Pick on two identical
// warm routers: one without a TracerProvider (tracing off) and one with a
// recording SDK provider (every request sampled, spans ended and dropped:
// the cost of recording, without an exporter's). It reports each one's
// median time per pick, their ratio, and each one's allocations per pick,
// and the staged-versus-monolithic ratio of the untraced router, which
// BenchmarkPickStagedVsMonolithic reported before tracing existed.
func BenchmarkPickTracing(b *testing.B) {
	const tokens, n = 2048, 64
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	off, eps, p := warmRouterWith(b, tokens, n, Options{})
	on, _, _ := warmRouterWith(b, tokens, n, Options{Set: telemetry.Set{TracerProvider: tp}})
	req := &Request{Prompts: []render.Prompt{{TokenIDs: p}}}
	ctx := context.Background()
	once := func(pick func(context.Context, *Request, []Endpoint) (*Decision, error)) {
		d, err := pick(ctx, req, eps)
		checkWarm(b, d, err, tokens)
		d.Done(DoneInfo{})
	}
	allocsOff := testing.AllocsPerRun(100, func() { once(off.Pick) })
	allocsOn := testing.AllocsPerRun(100, func() { once(on.Pick) })
	allocsMono := testing.AllocsPerRun(100, func() { once(off.legacyPick) })
	timed := func(pick func(context.Context, *Request, []Endpoint) (*Decision, error)) time.Duration {
		t0 := time.Now()
		once(pick)
		return time.Since(t0)
	}
	tOff := make([]time.Duration, 0, b.N)
	tOn := make([]time.Duration, 0, b.N)
	tMono := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			tOff = append(tOff, timed(off.Pick))
			tMono = append(tMono, timed(off.legacyPick))
			tOn = append(tOn, timed(on.Pick))
		} else {
			tOn = append(tOn, timed(on.Pick))
			tMono = append(tMono, timed(off.legacyPick))
			tOff = append(tOff, timed(off.Pick))
		}
	}
	b.StopTimer()
	mOff, mOn, mMono := median(tOff), median(tOn), median(tMono)
	b.ReportMetric(float64(mOff.Nanoseconds()), "off-p50-ns/pick")
	b.ReportMetric(float64(mOn.Nanoseconds()), "recording-p50-ns/pick")
	b.ReportMetric(float64(mOn)/float64(mOff), "recording/off")
	b.ReportMetric(float64(mOff)/float64(mMono), "off/monolithic")
	b.ReportMetric(allocsOff, "off-allocs/pick")
	b.ReportMetric(allocsOn, "recording-allocs/pick")
	b.ReportMetric(allocsMono, "monolithic-allocs/pick")
}
