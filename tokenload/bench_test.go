package tokenload

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/telemetry"
)

func benchTracker(b *testing.B, endpoints int) (*Tracker, []string) {
	b.Helper()
	tr, err := NewTracker(Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry()}})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, endpoints)
	for i := range names {
		names[i] = fmt.Sprintf("10.0.%d.%d:8000", i/256, i%256)
		tr.Dispatch(names[i], 0).Done()
	}
	return tr, names
}

// BenchmarkRequestLifecycle is one request's accounting: DispatchInto,
// FirstChunk, Done, into a caller-owned handle.
func BenchmarkRequestLifecycle(b *testing.B) {
	tr, names := benchTracker(b, 64)
	var h Inflight
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tr.DispatchInto(&h, names[i&63], 2048)
		h.FirstChunk()
		h.Done()
		i++
	}
	for _, ep := range names {
		if tok, req, _ := tr.Load(ep); tok != 0 || req != 0 {
			b.Fatalf("%s left with %d tokens, %d requests", ep, tok, req)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
}

// BenchmarkRequestLifecycleParallel runs the lifecycle from every P, all
// goroutines spreading over 64 endpoints (contention on shared counters).
func BenchmarkRequestLifecycleParallel(b *testing.B) {
	tr, names := benchTracker(b, 64)
	var seq atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var h Inflight
		i := int(seq.Add(1))
		for pb.Next() {
			tr.DispatchInto(&h, names[i&63], 2048)
			h.FirstChunk()
			h.Done()
			i++
		}
	})
	for _, ep := range names {
		if tok, req, _ := tr.Load(ep); tok != 0 || req != 0 {
			b.Fatalf("%s left with %d tokens, %d requests", ep, tok, req)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
}

// BenchmarkLoadAndScore is the per-request read side for 64 candidates: one
// Load and one Score each.
func BenchmarkLoadAndScore(b *testing.B) {
	tr, names := benchTracker(b, 64)
	for i, ep := range names {
		tr.Dispatch(ep, int64(i)*10_000)
	}
	b.ReportAllocs()
	var sum float64
	for b.Loop() {
		sum = 0
		for _, ep := range names {
			tok, _, _ := tr.Load(ep)
			sum += Score(tok, 2048, 0)
		}
	}
	if sum <= 0 || sum >= 64 {
		b.Fatalf("score sum %v", sum)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/candidate")
}
