package bench

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/kvroute/kvroute/kvindex"
)

// scaleFixture is an index for one rung of a scaling ladder: candidates hold
// a staircase of prompt, everything else is background.
type scaleFixture struct {
	ix    *kvindex.Index
	keys  []kvindex.Key
	cands []string
	steps []int
}

// matchScale runs the lookup of one rung: Match of fx.keys against
// fx.cands, checked against the staircase.
func matchScale(b *testing.B, fx *scaleFixture) {
	var out kvindex.MatchResult
	fx.ix.Match(fx.keys, fx.cands, &out)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fx.ix.Match(fx.keys, fx.cands, &out)
	}
	b.StopTimer()
	for c, e := range out.Endpoints() {
		if e.Blocks != fx.steps[c] {
			b.Fatalf("candidate %d matched %d blocks, want %d", c, e.Blocks, fx.steps[c])
		}
	}
	perBlock(b, len(fx.keys))
}

// BenchmarkScaleMemberships shows how lookup cost grows with the index: a
// 2,048-token prompt matched against 64 candidates while the index holds
// 10^4 … 10^7 (block, endpoint) memberships. The 10^7 rung needs about
// 1 GiB and tens of seconds to build; it runs only without -short.
func BenchmarkScaleMemberships(b *testing.B) {
	for _, m := range []struct {
		name string
		n    int
	}{{"1e4", 1e4}, {"1e5", 1e5}, {"1e6", 1e6}, {"1e7", 1e7}} {
		var fx *scaleFixture
		b.Run("memberships="+m.name, func(b *testing.B) {
			if m.n >= 1e7 && testing.Short() {
				b.Skip("the 10^7 rung needs ~1 GiB; skipped with -short")
			}
			if fx == nil { // built once per rung, kept across the b.N ramp
				fx = buildScaleMemberships(b, m.n)
			}
			matchScale(b, fx)
			b.ReportMetric(float64(fx.ix.Stats().Memberships), "memberships")
		})
		if fx != nil {
			fx.ix.Close()
		}
		fx = nil
		runtime.GC() // release this rung before building the next
	}
}

func buildScaleMemberships(b *testing.B, memberships int) *scaleFixture {
	b.Helper()
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	if err != nil {
		b.Fatal(err)
	}
	eps := EndpointIDs(64)
	prompt := Tokens(1<<59, 2048)
	steps := Steps(len(eps), len(prompt)/ix.BlockSize())
	if err := Staircase(ix, eps, prompt, steps, 1<<50); err != nil {
		b.Fatal(err)
	}
	if _, err := Background(ix, eps, memberships-ix.Stats().Memberships, 64, 4); err != nil {
		b.Fatal(err)
	}
	keys := kvindex.Keys(nil, prompt, ix.BlockSize(), &kvindex.KeyParams{Model: Model})
	return &scaleFixture{ix: ix, keys: keys, cands: eps, steps: steps}
}

// BenchmarkScaleEndpoints shows how lookup cost grows with the fleet: a
// 2,048-token prompt held (as a staircase of prefixes) by 8 … 1,024
// endpoints and matched against all of them, in an index of 2^20 background
// blocks spread over 1,024 endpoints. The 1,024 rung runs only without
// -short.
func BenchmarkScaleEndpoints(b *testing.B) {
	for _, n := range []int{8, 16, 32, 64, 128, 256, 512, 1024} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			if n >= 1024 && testing.Short() {
				b.Skip("the 1,024-endpoint rung is skipped with -short")
			}
			fx := getScaleEndpoints(b, n)
			matchScale(b, fx)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/endpoint")
		})
	}
}

// scaleEndpoints is the shared index of BenchmarkScaleEndpoints, built on
// first use; rungs holds one fixture per candidate count.
var scaleEndpoints struct {
	ix    *kvindex.Index
	eps   []string
	rungs map[int]*scaleFixture
}

func getScaleEndpoints(b *testing.B, n int) *scaleFixture {
	b.Helper()
	s := &scaleEndpoints
	if s.ix == nil {
		ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
		if err != nil {
			b.Fatal(err)
		}
		s.eps = EndpointIDs(1024)
		if _, err := Background(ix, s.eps, 1<<20, 64, 5); err != nil {
			b.Fatal(err)
		}
		s.ix, s.rungs = ix, map[int]*scaleFixture{}
	}
	if fx, ok := s.rungs[n]; ok {
		return fx
	}
	prompt := Tokens(uint64(n)<<20|1<<58, 2048)
	cands := s.eps[:n]
	steps := Steps(n, len(prompt)/s.ix.BlockSize())
	if err := Staircase(s.ix, cands, prompt, steps, uint64(n)<<40|1<<50); err != nil {
		b.Fatal(err)
	}
	fx := &scaleFixture{ix: s.ix, cands: cands, steps: steps,
		keys: kvindex.Keys(nil, prompt, s.ix.BlockSize(), &kvindex.KeyParams{Model: Model})}
	s.rungs[n] = fx
	return fx
}
