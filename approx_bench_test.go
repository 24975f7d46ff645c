package kvroute

import (
	"context"
	"testing"
	"time"

	"github.com/kvroute/kvroute/approx"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// BenchmarkPickApproximate alternates, as BenchmarkPickStagedVsMonolithic
// does, a Pick on the warm benchmark router without an approximate index
// (every decision blind: events are off) and one on the same warm router
// with an enabled approximate index where every one of the 64 endpoints is
// approximate and holds its share of the prompt as approximate entries too
// (the most the approximate stage can cost: a Match per candidate and a
// Record of the prompt's 32 blocks per decision). It reports the median of
// each and their ratio (on/off).
func BenchmarkPickApproximate(b *testing.B) {
	const tokens, n = 2048, 64
	off, eps, p := warmRouter(b, tokens, n)
	ix, err := approx.New(approx.Config{Enabled: true}, approx.Options{Set: telemetry.Set{}})
	if err != nil {
		b.Fatal(err)
	}
	on, _, _ := warmRouterWith(b, tokens, n, Options{Approximate: ix})
	if err := on.SetEndpoints(eps); err != nil {
		b.Fatal(err)
	}
	req := &Request{Prompts: []render.Prompt{{TokenIDs: p}}}
	ctx := context.Background()
	s, err := on.Match(ctx, req, eps) // the prompt's block keys
	if err != nil {
		b.Fatal(err)
	}
	keys := append([]kvindex.Key(nil), s.st.keys...)
	s.Release()
	bs := on.cfg.BlockSize
	for i, e := range eps {
		ix.Record(e.ID, keys[:1+i%(tokens/bs)])
	}
	offT := make([]time.Duration, 0, b.N)
	onT := make([]time.Duration, 0, b.N)
	run := func(r *Router, want approx.Mode) time.Duration {
		t0 := time.Now()
		d, err := r.Pick(ctx, req, eps)
		elapsed := time.Since(t0)
		checkWarm(b, d, err, tokens)
		if d.CacheMode != want {
			b.Fatalf("mode %v, want %v", d.CacheMode, want)
		}
		d.Done(DoneInfo{})
		d.Release()
		return elapsed
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			offT = append(offT, run(off, approx.ModeBlind))
			onT = append(onT, run(on, approx.ModeApproximate))
		} else {
			onT = append(onT, run(on, approx.ModeApproximate))
			offT = append(offT, run(off, approx.ModeBlind))
		}
	}
	b.StopTimer()
	mOff, mOn := median(offT), median(onT)
	b.ReportMetric(float64(mOff.Nanoseconds()), "off-p50-ns/pick")
	b.ReportMetric(float64(mOn.Nanoseconds()), "approximate-p50-ns/pick")
	b.ReportMetric(float64(mOn)/float64(mOff), "approximate/off")
}
