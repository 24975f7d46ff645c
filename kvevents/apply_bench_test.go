package kvevents

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// applyWorkload is a set of pre-encoded current-format BlockStored
// payloads: prompts × segments, each segment 16 blocks × 64 tokens chained
// on the previous segment of the same prompt, spread over endpoints.
type applyWorkload struct {
	payloads  [][]byte
	endpoints []string // per payload
	prompts   [][]uint32
	promptEP  []string
}

func newApplyWorkload(prompts, segments, blocks, endpoints int) *applyWorkload {
	rng := rand.New(rand.NewPCG(7, 11))
	w := &applyWorkload{}
	last := make([]uint64, prompts)
	eps := make([]string, endpoints)
	for i := range eps {
		eps[i] = fmt.Sprintf("10.0.0.%d:8000", i)
	}
	w.prompts = make([][]uint32, prompts)
	for p := 0; p < prompts; p++ {
		w.promptEP = append(w.promptEP, eps[p%endpoints])
	}
	// Segment-major order: every parent is stored before its children.
	for s := 0; s < segments; s++ {
		for p := 0; p < prompts; p++ {
			b := wiretest.StoredBatch(rng, blocks, 64, last[p], s > 0)
			e := &b.Events[0]
			last[p] = e.BlockHashes[blocks-1]
			w.prompts[p] = append(w.prompts[p], e.TokenIDs...)
			w.payloads = append(w.payloads, wire.AppendBatch(nil, b, wire.FormatVLLM))
			w.endpoints = append(w.endpoints, w.promptEP[p])
		}
	}
	return w
}

// BenchmarkApply measures decode + apply of a 16-block × 64-token
// BlockStored into a warm index. Each iteration stores a new chain segment
// (many distinct prompts, chained on their parents); after every pass over
// the workload the endpoints are cleared, so memory stays bounded and the
// clears are part of the measured cost. Reports blocks/s.
func BenchmarkApply(b *testing.B) {
	const blocks = 16
	b.Run(fmt.Sprintf("blocks=%d", blocks), func(b *testing.B) {
		ix, err := kvindex.New(kvindex.Config{BlockSize: 64, SweepInterval: -1}, kvindex.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer ix.Close()
		a, err := NewApplier(ApplierConfig{Model: "m"}, ix, Options{})
		if err != nil {
			b.Fatal(err)
		}
		w := newApplyWorkload(512, 8, blocks, 8)
		d := wire.NewDecoder(wire.Limits{})
		var batch wire.Batch
		// Warm the index: a resident population on other endpoints.
		warm := newApplyWorkload(1024, 4, blocks, 16)
		for i, p := range warm.payloads {
			if err := d.Decode(p, &batch); err != nil {
				b.Fatal(err)
			}
			a.Apply("warm-"+warm.endpoints[i], "m", &batch)
		}
		stored, i := 0, 0
		b.SetBytes(int64(len(w.payloads[0])))
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if i == len(w.payloads) {
				for _, ep := range w.promptEP[:8] {
					ix.Clear(ep)
				}
				i = 0
			}
			if err := d.Decode(w.payloads[i], &batch); err != nil {
				b.Fatal(err)
			}
			stored += a.Apply(w.endpoints[i], "m", &batch).StoredBlocks
			i++
		}
		b.StopTimer()
		if stored != blocks*b.N {
			b.Fatalf("stored %d blocks, want %d", stored, blocks*b.N)
		}
		b.ReportMetric(float64(stored)/b.Elapsed().Seconds(), "blocks/s")
		// The prompt of the last stored payload is matchable up to its
		// stored segments.
		p := (i - 1) % len(w.prompts)
		segs := (i-1)/len(w.prompts) + 1
		keys := kvindex.Keys(nil, w.prompts[p], 64, &kvindex.KeyParams{Model: "m"})
		var out kvindex.MatchResult
		ix.Match(keys, []string{w.promptEP[p]}, &out)
		if out.Endpoints()[0].Blocks != segs*blocks {
			b.Fatalf("matched %d blocks, want %d", out.Endpoints()[0].Blocks, segs*blocks)
		}
	})
}
