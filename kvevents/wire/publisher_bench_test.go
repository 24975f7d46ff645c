package wire_test

import (
	"math/rand/v2"
	"testing"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// BenchmarkPeekHeader measures what a stream's receiver pays per message
// to read the publisher identity before sequencing: PeekHeader on the same
// 16 blocks × 64 tokens BlockStored as BenchmarkDecode, in vLLM's snapshot
// layout (the identity after the events: a walk over them) and in the
// three-element layout (no identity: the headers only), against a full
// Decode of the snapshot layout as the floor of the same run.
func BenchmarkPeekHeader(b *testing.B) {
	batch := wiretest.StoredBatch(rand.New(rand.NewPCG(1, 2)), 16, 64, 0, false)
	old := wire.AppendBatch(nil, batch, wire.FormatVLLM)
	batch.PublisherID, batch.HasPublisherID = wiretest.PublisherID, true
	withID := wire.AppendBatch(nil, batch, wire.FormatVLLM)
	b.Run("decode/identity", func(b *testing.B) {
		d := wire.NewDecoder(wire.Limits{})
		var out wire.Batch
		b.ReportAllocs()
		for b.Loop() {
			if err := d.Decode(withID, &out); err != nil || !out.HasPublisherID {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name    string
		payload []byte
	}{{"peek/identity", withID}, {"peek/no-identity", old}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h, err := wire.PeekHeader(c.payload)
				if err != nil || h.Events != 1 {
					b.Fatal(err)
				}
			}
		})
	}
}
