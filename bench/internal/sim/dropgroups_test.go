package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// The event path decodes every batch into one reused Batch, whose Decoder
// reuses each event slot's slices. dropCacheGroups (Config.IgnoreCacheGroups)
// removes the window and Mamba stores in place: had it copied a kept event
// over a dropped one's slot, two slots would share one event's arrays and
// the next batch's Decode would write two events into them, handing the
// index one store's hashes under another's (the "before" rows of the
// hybrid report were measured so until this was found).
func TestDropCacheGroupsLeavesNoSharedSlices(t *testing.T) {
	store := func(kind string, group int, hashes ...uint64) wire.Event {
		e := wire.Event{Type: wire.EventBlockStored, BlockHashes: hashes, BlockSize: 64, Medium: "GPU",
			Kind: kind, Group: group, HasGroup: true}
		for i := range 64 * len(hashes) {
			e.TokenIDs = append(e.TokenIDs, uint32(i))
		}
		return e
	}
	encode := func(evs ...wire.Event) []byte {
		return wire.AppendBatch(nil, &wire.Batch{Events: evs}, wire.FormatVLLM)
	}
	first := encode(store("sliding_window", 1, 1, 2, 3, 4, 5, 6, 7, 8), store("full_attention", 0, 11, 12, 13, 14, 15, 16, 17, 18))
	second := encode(store("full_attention", 0, 21, 22, 23), store("full_attention", 0, 31, 32, 33))

	dec := wire.NewDecoder(wire.Limits{})
	var b wire.Batch
	require.NoError(t, dec.Decode(first, &b))
	dropCacheGroups(&b)
	require.Len(t, b.Events, 1)
	require.Equal(t, []uint64{11, 12, 13, 14, 15, 16, 17, 18}, b.Events[0].BlockHashes)

	require.NoError(t, dec.Decode(second, &b))
	dropCacheGroups(&b)
	require.Len(t, b.Events, 2)
	require.Equal(t, []uint64{21, 22, 23}, b.Events[0].BlockHashes)
	require.Equal(t, []uint64{31, 32, 33}, b.Events[1].BlockHashes)
}
