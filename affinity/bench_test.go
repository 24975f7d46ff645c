package affinity

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

// BenchmarkFilterApply measures one decision over n candidates of a 32-block
// (2,048-token) request: 4 warm endpoints, the rest cold, load known, metrics
// registered.
func BenchmarkFilterApply(b *testing.B) {
	for _, n := range []int{8, 64, 256} {
		for _, tc := range []struct {
			name     string
			warmLoad int64
			want     Outcome
		}{
			{"sticky", 100_000, OutcomeSticky},
			{"load_override", 1_000_000, OutcomeLoadOverride},
		} {
			b.Run(fmt.Sprintf("endpoints=%d/%s", n, tc.name), func(b *testing.B) {
				f, err := New(DefaultConfig(), Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry()}})
				if err != nil {
					b.Fatal(err)
				}
				cands := make([]Candidate, n)
				for i := range cands {
					cands[i] = Candidate{Score: 3, InFlightTokens: int64(i) * 1000, LoadKnown: true}
				}
				for i := range 4 {
					cands[i*n/4] = Candidate{Score: 31.2, InFlightTokens: tc.warmLoad + int64(i), LoadKnown: true}
				}
				dst := make([]int, 0, n)
				b.ReportAllocs()
				b.ResetTimer()
				var o Outcome
				for b.Loop() {
					dst, o = f.Apply(dst, 32, cands)
				}
				b.StopTimer()
				if o != tc.want {
					b.Fatalf("outcome %v, want %v", o, tc.want)
				}
				if (o == OutcomeSticky && len(dst) != 4) || (o != OutcomeSticky && len(dst) != n) {
					b.Fatalf("%d candidates passed", len(dst))
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/candidate")
			})
		}
	}
}

func BenchmarkPeakPrefillThroughput(b *testing.B) {
	ttfts := make([]time.Duration, 20)
	for i := range ttfts {
		ttfts[i] = time.Duration(500+i) * time.Millisecond
	}
	b.ReportAllocs()
	var v float64
	for b.Loop() {
		v, _ = PeakPrefillThroughput(8192, ttfts)
	}
	if v != 8192e9/509.5e6 {
		b.Fatalf("got %v", v)
	}
}
