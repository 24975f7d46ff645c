package lora

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/enginemetrics"
)

// benchPair builds two identical Routers over 16 endpoints, one with the
// adapter-affinity scorer and one without, the scorer's source holding an
// adapter state for every endpoint.
func benchPair(b *testing.B) (with, without *kvroute.Router, eps []kvroute.Endpoint) {
	src := newStatic()
	eps = endpoints(16)
	for i, ep := range eps {
		src.set(ep.ID, enginemetrics.LoRAInfo{Reported: true, Running: []string{string(rune('a' + i%8))}, MaxLoRA: 2}, true)
	}
	s, err := New(Config{}, src, Options{})
	if err != nil {
		b.Fatal(err)
	}
	return testRouter(b, s.Weighted()), testRouter(b), eps
}

// benchmarkPick alternates a Pick of req on the Router with the scorer and
// on the one without, and reports both medians, their ratio and the extra
// allocations per Pick.
func benchmarkPick(b *testing.B, req *kvroute.Request) {
	with, without, eps := benchPair(b)
	ctx := context.Background()
	var last string
	pick := func(r *kvroute.Router) {
		d, err := r.Pick(ctx, req, eps)
		if err != nil {
			b.Fatal(err)
		}
		last = d.Endpoint.ID
		d.Done(kvroute.DoneInfo{})
	}
	run := func(r *kvroute.Router) time.Duration {
		t0 := time.Now()
		pick(r)
		return time.Since(t0)
	}
	a := make([]time.Duration, 0, b.N)
	o := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			a = append(a, run(with))
			o = append(o, run(without))
		} else {
			o = append(o, run(without))
			a = append(a, run(with))
		}
	}
	b.StopTimer()
	if last == "" {
		b.Fatal("no pick")
	}
	allocsWith := testing.AllocsPerRun(200, func() { pick(with) })
	allocsWithout := testing.AllocsPerRun(200, func() { pick(without) })
	slices.Sort(a)
	slices.Sort(o)
	ma, mo := a[len(a)/2], o[len(o)/2]
	b.ReportMetric(float64(ma.Nanoseconds()), "lora-p50-ns/pick")
	b.ReportMetric(float64(mo.Nanoseconds()), "plain-p50-ns/pick")
	b.ReportMetric(float64(ma)/float64(mo), "with/without")
	b.ReportMetric(allocsWith-allocsWithout, "extra-allocs/pick")
}

// BenchmarkPickNoAdapter: a request naming no adapter through a Router with
// the scorer against one without (the target: ratio about 1, no extra
// allocation).
func BenchmarkPickNoAdapter(b *testing.B) { benchmarkPick(b, request("", 2048)) }

// BenchmarkPickWithAdapter: a request naming an adapter, scored on 16
// candidates; the added cost of the scorer.
func BenchmarkPickWithAdapter(b *testing.B) { benchmarkPick(b, request("c", 2048)) }
