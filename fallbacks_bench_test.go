package kvroute

import (
	"context"
	"testing"
	"time"

	"github.com/kvroute/kvroute/render"
)

// BenchmarkPickWithFallbacks alternates Pick without fallbacks and Pick
// naming two (64 candidates: every other candidate is scored for the
// ranking, since the warm one is the affinity filter's only pick), on the
// same warm router, and reports the median of each and their ratio
// (with/without; 1.00 = ranking the fallbacks costs nothing).
func BenchmarkPickWithFallbacks(b *testing.B) {
	const tokens, n = 2048, 64
	r, eps, p := warmRouter(b, tokens, n)
	plain := &Request{Prompts: []render.Prompt{{TokenIDs: p}}}
	ranked := &Request{Prompts: []render.Prompt{{TokenIDs: p}}, Fallbacks: 2}
	ctx := context.Background()
	without := make([]time.Duration, 0, b.N)
	with := make([]time.Duration, 0, b.N)
	run := func(req *Request) time.Duration {
		t0 := time.Now()
		d, err := r.Pick(ctx, req, eps)
		elapsed := time.Since(t0)
		checkWarm(b, d, err, tokens)
		if len(d.Fallbacks) != req.Fallbacks {
			b.Fatalf("%d fallbacks, want %d", len(d.Fallbacks), req.Fallbacks)
		}
		d.Done(DoneInfo{})
		return elapsed
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			without = append(without, run(plain))
			with = append(with, run(ranked))
		} else {
			with = append(with, run(ranked))
			without = append(without, run(plain))
		}
	}
	b.StopTimer()
	mw, mo := median(with), median(without)
	b.ReportMetric(float64(mo.Nanoseconds()), "without-p50-ns/pick")
	b.ReportMetric(float64(mw.Nanoseconds()), "with2-p50-ns/pick")
	b.ReportMetric(float64(mw)/float64(mo), "with/without")
}
