package kvroute

import (
	"context"
	"testing"
	"time"

	"github.com/kvroute/kvroute/render"
)

// BenchmarkPickFeaturesOff is Pick on a router with none of session
// affinity, LoRA affinity, several models or the approximate index
// configured (the warm benchmark router: one model, no scorers beyond the
// token load, no approximate index), alternated in one run with the two
// references kept in the package: legacyPick, the one-function Pick from
// before the stages and the four features, and pickOneModel, Pick without
// the model step. It reports each one's median, Pick's ratio to each, and
// each one's allocations per pick (testing.AllocsPerRun, before the timed
// loop); every decision is checked to be the fully warm endpoint.
func BenchmarkPickFeaturesOff(b *testing.B) {
	const tokens, n = 2048, 64
	r, eps, p := warmRouter(b, tokens, n)
	req := &Request{Prompts: []render.Prompt{{TokenIDs: p}}}
	ctx := context.Background()
	picks := []func(context.Context, *Request, []Endpoint) (*Decision, error){r.Pick, r.legacyPick, r.pickOneModel}
	run := func(pick func(context.Context, *Request, []Endpoint) (*Decision, error)) time.Duration {
		t0 := time.Now()
		d, err := pick(ctx, req, eps)
		elapsed := time.Since(t0)
		checkWarm(b, d, err, tokens)
		d.Done(DoneInfo{})
		d.Release()
		return elapsed
	}
	allocs := make([]float64, len(picks))
	for i, pick := range picks {
		allocs[i] = testing.AllocsPerRun(200, func() { run(pick) })
	}
	times := make([][]time.Duration, len(picks))
	for i := range times {
		times[i] = make([]time.Duration, 0, b.N)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range picks { // rotate which one runs first, so none gets the others' warm caches
			j := (i + k) % len(picks)
			times[j] = append(times[j], run(picks[j]))
		}
	}
	b.StopTimer()
	pick, legacy, one := median(times[0]), median(times[1]), median(times[2])
	b.ReportMetric(float64(pick.Nanoseconds()), "pick-p50-ns")
	b.ReportMetric(float64(legacy.Nanoseconds()), "legacy-p50-ns")
	b.ReportMetric(float64(one.Nanoseconds()), "onemodel-p50-ns")
	b.ReportMetric(float64(pick)/float64(legacy), "pick/legacy")
	b.ReportMetric(float64(pick)/float64(one), "pick/onemodel")
	b.ReportMetric(allocs[0], "pick-allocs")
	b.ReportMetric(allocs[1], "legacy-allocs")
	b.ReportMetric(allocs[2], "onemodel-allocs")
}
