package bench

import (
	"fmt"
	"testing"

	"github.com/kvroute/kvroute/kvindex"
)

// perBlock reports the benchmark's time per op divided by blocks.
func perBlock(b *testing.B, blocks int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(blocks), "ns/block")
}

// BenchmarkKeys measures router block keys of a 2,048-token prompt (32
// blocks of 64): the per-request hashing cost. Target ≤ 1 µs.
func BenchmarkKeys(b *testing.B) {
	b.Run("tokens=2048", func(b *testing.B) {
		toks := Tokens(7, 2048)
		p := &kvindex.KeyParams{Model: Model}
		// The expected chain, computed block by block with ChainKey.
		want := make([]kvindex.Key, 0, 32)
		parent := kvindex.RootKey(Model)
		for i := 0; i+kvindex.DefaultBlockSize <= len(toks); i += kvindex.DefaultBlockSize {
			parent = kvindex.ChainKey(parent, toks[i:i+kvindex.DefaultBlockSize], nil)
			want = append(want, parent)
		}
		dst := make([]kvindex.Key, 0, 64)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			dst = kvindex.Keys(dst, toks, kvindex.DefaultBlockSize, p)
		}
		b.StopTimer()
		if len(dst) != len(want) {
			b.Fatalf("%d keys, want %d", len(dst), len(want))
		}
		for i := range want {
			if dst[i] != want[i] {
				b.Fatalf("key %d = %x, want %x", i, dst[i], want[i])
			}
		}
		perBlock(b, len(want))
	})
}

// BenchmarkMatch measures the fused longest-prefix Match against a warm
// index of more than 2^20 blocks: a 2,048-token prompt against 64
// candidates (target ≤ 2 µs, 0 allocs) and a 32,768-token prompt against 256
// candidates. Candidate i holds a known prefix of the prompt.
func BenchmarkMatch(b *testing.B) {
	for _, tc := range []struct{ tokens, endpoints int }{{2048, 64}, {32768, 256}} {
		b.Run(fmt.Sprintf("tokens=%d/endpoints=%d", tc.tokens, tc.endpoints), func(b *testing.B) {
			w := getWarm(b)
			prompt, steps := w.p2k, w.steps2k
			if tc.tokens == 32768 {
				prompt, steps = w.p32k, w.steps32k
			}
			if st := w.ix.Stats(); st.Blocks < 1_000_000 {
				b.Fatalf("warm index holds %d blocks, want at least 1,000,000", st.Blocks)
			}
			keys := kvindex.Keys(nil, prompt, w.ix.BlockSize(), &kvindex.KeyParams{Model: Model})
			cands := w.endpoints[:tc.endpoints]
			var out kvindex.MatchResult
			w.ix.Match(keys, cands, &out) // size the result
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w.ix.Match(keys, cands, &out)
			}
			b.StopTimer()
			for c, e := range out.Endpoints() {
				if e.Blocks != steps[c] || e.GPU != steps[c] || e.Endpoint != cands[c] {
					b.Fatalf("candidate %d: %+v, want %d GPU blocks", c, e, steps[c])
				}
			}
			perBlock(b, len(keys))
		})
	}
}
