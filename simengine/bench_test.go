package simengine

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkVirtualEngine runs requests of 2,048 tokens (32 blocks of 64, the
// first 24 shared) through a virtual-clock engine, one arrival every 100 ms (about 60 % load),
// 16 output tokens each: the cost per simulated request of a routing-quality
// simulation.
func BenchmarkVirtualEngine(b *testing.B) {
	e, err := New(Config{NumGPUBlocks: 4096, Sink: EventSinkFunc(func(EventBatch) {})}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	prefix := seqTokens(1, 1536)
	done := 0
	onDone := func(r Result) {
		if r.Err == nil {
			done++
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p := append(slices.Clip(prefix), seqTokens(100_000+i*512, 512)...)
		if _, err := e.Submit(Request{Prompt: p, MaxTokens: 16, OnDone: onDone}); err != nil {
			b.Fatal(err)
		}
		e.AdvanceTo(e.Now().Add(100 * time.Millisecond))
	}
	e.RunUntilIdle()
	st := e.Stats()
	if done != int(st.RequestSuccess) || done == 0 || st.PrefixCacheHits == 0 {
		b.Fatalf("done %d, stats %+v", done, st)
	}
	b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "requests/s")
	b.ReportMetric(float64(st.PrefixCacheHits)/float64(st.PrefixCacheQueries), "hit-rate")
	b.ReportMetric(float64(st.Steps)/float64(done), "steps/request")
}

// BenchmarkHashBlock measures one sha256_cbor block hash of 64 tokens.
func BenchmarkHashBlock(b *testing.B) {
	var h hasher
	toks := seqTokens(50_000, 64)
	d := NoneHash
	b.ReportAllocs()
	for b.Loop() {
		d = h.hash(d, toks, nil)
	}
	if d == NoneHash {
		b.Fatal("hash did not change")
	}
	b.ReportMetric(float64(b.N)*64/b.Elapsed().Seconds(), "tokens/s")
}
