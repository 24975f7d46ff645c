package kvroute

import (
	"context"
	"fmt"
	"testing"

	"github.com/kvroute/kvroute/kvindex"
)

// BenchmarkPick measures a full Pick — block keys, index match, affinity
// filter and token-load score, speculative entries and load accounting —
// with the prompt's tokens supplied (render excluded) against a warm index.
func BenchmarkPick(b *testing.B) {
	for _, tc := range []struct{ tokens, endpoints int }{{2048, 64}} {
		b.Run(fmt.Sprintf("tokens=%d/endpoints=%d", tc.tokens, tc.endpoints), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Model = testModel
			cfg.Events.Enabled = false
			cfg.DisableRender = true
			r, err := New(cfg, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			eps := endpoints(tc.endpoints)
			// Warm index: every endpoint holds a different share of the prompt,
			// plus 64 unrelated 32-block prompts each.
			p := prompt(1, tc.tokens)
			bs := r.Index().BlockSize()
			nb := tc.tokens / bs
			for i, e := range eps {
				held := 1 + i%nb
				hashes := make([]uint64, held)
				for j := range hashes {
					hashes[j] = uint64(i*1_000_000 + j + 1)
				}
				if err := r.Index().Store(e.ID, &kvindex.StoreEvent{EngineHashes: hashes, Tokens: p[:held*bs],
					BlockSize: bs, Model: testModel, Group: -1}); err != nil {
					b.Fatal(err)
				}
				for k := 0; k < 64; k++ {
					other := prompt(1000+i*64+k, tc.tokens)
					hs := make([]uint64, nb)
					for j := range hs {
						hs[j] = uint64(i*1_000_000 + (k+1)*1000 + j)
					}
					if err := r.Index().Store(e.ID, &kvindex.StoreEvent{EngineHashes: hs, Tokens: other,
						BlockSize: bs, Model: testModel, Group: -1}); err != nil {
						b.Fatal(err)
					}
				}
			}
			req := &Request{Prompts: []Prompt{{Tokens: p}}}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d, err := r.Pick(ctx, req, eps)
				if err != nil {
					b.Fatal(err)
				}
				if d.CachedTokens != tc.tokens {
					b.Fatalf("picked %s with %d cached tokens; the fully warm endpoint holds %d", d.Endpoint.ID, d.CachedTokens, tc.tokens)
				}
				d.Done(nil)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tc.tokens/bs), "ns/block")
		})
	}
}
