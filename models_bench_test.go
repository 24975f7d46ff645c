package kvroute

import (
	"context"
	"testing"
	"time"

	"github.com/kvroute/kvroute/render"
)

// pickOneModel is Pick as it was before several models per Router: the
// request's checks, the admission and the profile, without narrowing the
// candidates to the request's model (forModel). The benchmark and the
// allocation test compare the two on the same router.
func (r *Router) pickOneModel(ctx context.Context, req *Request, endpoints []Endpoint) (*Decision, error) {
	if err := r.check(ctx, req, endpoints); err != nil {
		return nil, err
	}
	if err := r.pipe.admission.Admit(ctx, req, endpoints); err != nil {
		return nil, err
	}
	return r.pipe.profile.Pick(ctx, req, endpoints, stages{r})
}

// BenchmarkPickOneModelUnchanged alternates Pick and pickOneModel (Pick
// without the model step) on one warm router of one model, as
// BenchmarkPickStagedVsMonolithic does, and reports the medians and their
// ratio (1.00 = the model step costs nothing). "two_models" is Pick when
// half of the 64 endpoints serve another model: the candidates are
// narrowed to 32 (one copy of the list per request).
func BenchmarkPickOneModelUnchanged(b *testing.B) {
	const tokens, n = 2048, 64
	b.Run("one_model", func(b *testing.B) {
		r, eps, p := warmRouter(b, tokens, n)
		req := &Request{Prompts: []render.Prompt{{TokenIDs: p}}}
		ctx := context.Background()
		after := make([]time.Duration, 0, b.N)
		before := make([]time.Duration, 0, b.N)
		run := func(pick func(context.Context, *Request, []Endpoint) (*Decision, error)) time.Duration {
			t0 := time.Now()
			d, err := pick(ctx, req, eps)
			elapsed := time.Since(t0)
			checkWarm(b, d, err, tokens)
			d.Done(DoneInfo{})
			d.Release()
			return elapsed
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if i%2 == 0 {
				after = append(after, run(r.Pick))
				before = append(before, run(r.pickOneModel))
			} else {
				before = append(before, run(r.pickOneModel))
				after = append(after, run(r.Pick))
			}
		}
		b.StopTimer()
		ma, mb := median(after), median(before)
		b.ReportMetric(float64(ma.Nanoseconds()), "pick-p50-ns")
		b.ReportMetric(float64(mb.Nanoseconds()), "before-p50-ns")
		b.ReportMetric(float64(ma)/float64(mb), "pick/before")
	})
	b.Run("two_models", func(b *testing.B) {
		r, eps, p := warmRouter(b, tokens, n)
		for i := range eps {
			if i%2 == 1 {
				eps[i].Models = []string{"beta"}
			}
		}
		req := &Request{Prompts: []render.Prompt{{TokenIDs: p}}}
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			d, err := r.Pick(ctx, req, eps)
			if err != nil {
				b.Fatal(err)
			}
			if d.Endpoint.Models != nil {
				b.Fatalf("a request of the router's model went to %s, which serves %v", d.Endpoint.ID, d.Endpoint.Models)
			}
			d.Done(DoneInfo{})
			d.Release()
		}
	})
}
