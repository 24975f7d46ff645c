package bench

import (
	"context"
	"testing"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/render"
)

// benchPickRatio is BenchmarkRatio's Pick/tokens=2048/endpoints=64: a full
// kvroute.Router.Pick of a 2,048-token prompt supplied by the caller (render
// excluded) among 64 endpoints of the warm index, each Decision ended and
// released, against its own lookup in the same run: the prompt's block keys
// (kvindex.Keys) and one Match of them against the same 64 candidates, the
// least any router must do to know where the prompt is cached. x-lookup is
// the median per-batch ratio (reported as x-floor too, for the report);
// target ≤ 3, 0 allocations.
func benchPickRatio(b *testing.B) {
	w := getWarm(b)
	eps := w.eps[:64]
	cands := w.endpoints[:64]
	req := &kvroute.Request{Prompts: []render.Prompt{{TokenIDs: w.pPick}}}
	want := eps[len(eps)-1].ID
	ctx := context.Background()
	bs := w.ix.BlockSize()
	p := &kvindex.KeyParams{Model: Model}
	keys := make([]kvindex.Key, 0, len(w.pPick)/bs)
	var out kvindex.MatchResult
	var bad *kvroute.Decision
	pick := func() {
		d, err := w.router.Pick(ctx, req, eps)
		if err != nil {
			b.Fatal(err)
		}
		if d.Endpoint.ID != want || d.CachedTokens != len(w.pPick) {
			bad = d
			return
		}
		d.FirstChunk()
		d.Done(kvroute.DoneInfo{})
		d.Release()
	}
	lookup := func() {
		keys = kvindex.Keys(keys[:0], w.pPick, bs, p)
		w.ix.Match(keys, cands, &out)
	}
	interleaveAs(b, "x-lookup", "lookup-ns/op", pick, lookup, func() {})
	if bad != nil {
		b.Fatalf("picked %s with %d cached tokens; want %s with %d", bad.Endpoint.ID, bad.CachedTokens, want, len(w.pPick))
	}
	for c, e := range out.Endpoints() {
		if e.Blocks != w.stepsPick[c] {
			b.Fatalf("lookup: candidate %d holds %d blocks, want %d", c, e.Blocks, w.stepsPick[c])
		}
	}
}
