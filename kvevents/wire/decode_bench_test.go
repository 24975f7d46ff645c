package wire_test

import (
	"math/rand/v2"
	"testing"

	"github.com/shamaton/msgpack/v2"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// BenchmarkDecode measures decoding a current-format vLLM BlockStored of 16
// blocks × 64 tokens into a reused Batch (MB/s of payload).
func BenchmarkDecode(b *testing.B) {
	payload := wire.AppendBatch(nil, wiretest.StoredBatch(rand.New(rand.NewPCG(1, 2)), 16, 64, 0, false), wire.FormatVLLM)
	b.Run("blocks=16", func(b *testing.B) {
		d := wire.NewDecoder(wire.Limits{})
		var batch wire.Batch
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			if err := d.Decode(payload, &batch); err != nil {
				b.Fatal(err)
			}
		}
		if len(batch.Events) != 1 || len(batch.Events[0].TokenIDs) != 16*64 || len(batch.Events[0].BlockHashes) != 16 {
			b.Fatalf("decoded %d events", len(batch.Events))
		}
		b.ReportMetric(float64(b.N)*16/b.Elapsed().Seconds(), "blocks/s")
	})
	// The generic reflection-based decoder on the same bytes, for the
	// package documentation's comparison.
	b.Run("blocks=16/shamaton-generic", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		var v []any
		for b.Loop() {
			v = nil
			if err := msgpack.Unmarshal(payload, &v); err != nil {
				b.Fatal(err)
			}
		}
		if len(v) != 3 {
			b.Fatal("bad decode")
		}
	})
}
