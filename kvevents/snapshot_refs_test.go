package kvevents

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// A snapshot's chunks are decoded one after the other into one Batch, whose
// Decoder reuses each event slot's slices. filter drops the token-less
// stores (they become references) from the batch in place: had it copied a
// kept event over a dropped one's slot, the two slots would share one
// event's arrays, and the next chunk's Decode would write two events'
// hashes and tokens into them (the first of the two then reading the
// second's blocks).
func TestSnapshotRefsFilterLeavesNoSharedSlices(t *testing.T) {
	store := func(hashes []uint64, tokens int) wire.Event {
		e := wire.Event{Type: wire.EventBlockStored, BlockHashes: hashes, BlockSize: 16, Medium: "GPU"}
		for i := 0; i < tokens; i++ {
			e.TokenIDs = append(e.TokenIDs, uint32(len(hashes)*1000+i))
		}
		return e
	}
	encode := func(evs ...wire.Event) []byte {
		return wire.AppendBatch(nil, &wire.Batch{Events: evs}, wire.FormatVLLM)
	}
	// Chunk 1: a reference (token-less store) before a store with tokens,
	// which filter moves into the reference's slot.
	first := encode(store([]uint64{1}, 0), store([]uint64{2, 3, 4, 5, 6, 7, 8, 9}, 128))
	// Chunk 2: two smaller stores with tokens in those two slots, which
	// fit in the arrays the first chunk's store left there.
	second := encode(store([]uint64{10, 11, 12}, 48), store([]uint64{20, 21, 22, 23}, 64))

	dec := wire.NewDecoder(wire.Limits{})
	var b wire.Batch
	var refs snapshotRefs
	require.NoError(t, dec.Decode(first, &b))
	refs.filter(&b)
	require.Len(t, b.Events, 1)
	require.Equal(t, []uint64{2, 3, 4, 5, 6, 7, 8, 9}, b.Events[0].BlockHashes)

	require.NoError(t, dec.Decode(second, &b))
	refs.filter(&b)
	var want wire.Batch
	require.NoError(t, wire.NewDecoder(wire.Limits{}).Decode(second, &want))
	require.Len(t, b.Events, 2)
	for i := range want.Events {
		require.Equal(t, want.Events[i].BlockHashes, b.Events[i].BlockHashes, "event %d's hashes", i)
		require.Equal(t, want.Events[i].TokenIDs, b.Events[i].TokenIDs, "event %d's tokens", i)
	}
}
