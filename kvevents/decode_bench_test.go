package kvevents

import (
	"math/rand/v2"
	"testing"

	"github.com/shamaton/msgpack/v2"
)

// benchStored builds a current-format (map event) BlockStored batch of
// blocks × blockSize tokens with realistic values: 64-bit int hashes (cf),
// token IDs spread over a 150k vocabulary (mostly 5-byte ce ints).
func benchStored(rng *rand.Rand, blocks, blockSize int, parent uint64, hasParent bool) *Batch {
	e := Event{
		Type:       EventBlockStored,
		ParentHash: parent, HasParent: hasParent,
		BlockSize: blockSize,
		Medium:    "GPU",
		ExtraKeys: make([][]ExtraKey, blocks),
		Group:     0, HasGroup: true,
		Kind: "full_attention",
	}
	for i := 0; i < blocks; i++ {
		e.BlockHashes = append(e.BlockHashes, rng.Uint64()|1<<63)
	}
	for i := 0; i < blocks*blockSize; i++ {
		e.TokenIDs = append(e.TokenIDs, uint32(rng.IntN(150000)))
	}
	return &Batch{TS: goldenTS, Events: []Event{e}, HasDPRank: true}
}

// BenchmarkDecode measures decoding a current-format vLLM BlockStored of 16
// blocks × 64 tokens into a reused Batch (MB/s of payload).
func BenchmarkDecode(b *testing.B) {
	payload := AppendBatch(nil, benchStored(rand.New(rand.NewPCG(1, 2)), 16, 64, 0, false), FormatVLLM)
	b.Run("blocks=16", func(b *testing.B) {
		d := NewDecoder(Limits{})
		var batch Batch
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
