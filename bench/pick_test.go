package bench

import (
	"context"
	"testing"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/render"
)

// BenchmarkPick measures a full kvroute.Router.Pick — block keys, index
// match, affinity filter, token-load score, speculative entries and load
// accounting — for a 2,048-token prompt supplied by the caller (render
// excluded) among 64 endpoints of the warm index. Candidate i holds a
// staircase prefix of the prompt; the last one holds all of it and must be
// chosen. Each Decision is released, as a host that reuses them does.
// Target ≤ 10 µs; against its own lookup, see BenchmarkRatio/Pick.
func BenchmarkPick(b *testing.B) {
	b.Run("tokens=2048/endpoints=64", func(b *testing.B) {
		w := getWarm(b)
		eps := w.eps[:64]
		req := &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: w.pPick}}}
		want := eps[len(eps)-1].ID
		ctx := context.Background()
		blocks := len(w.pPick) / w.ix.BlockSize()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			d, err := w.router.Pick(ctx, req, eps)
			if err != nil {
				b.Fatal(err)
			}
			if d.Endpoint.ID != want || d.CachedTokens != len(w.pPick) {
				b.Fatalf("picked %s with %d cached tokens; want %s with %d", d.Endpoint.ID, d.CachedTokens, want, len(w.pPick))
			}
			d.FirstChunk()
			d.Done(kvroute.DoneInfo{})
			d.Release()
		}
		b.StopTimer()
		perBlock(b, blocks)
	})
}
