package server

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/simengine"
)

// A group that stores a block it holds already (a recomputed block, as
// vLLM's block pool does not de-duplicate) holds two copies: the snapshot
// keeps the block after one copy's removal, and lists each copy still
// held, as the stream does.
func TestSnapshotKeepsEachCopyOfAGroupBlock(t *testing.T) {
	r := newSnapshotRecorder(wire.FormatVLLM)
	full := simengine.Event{Type: simengine.BlockStored, BlockHashes: []uint64{7, 8}, TokenIDs: []uint32{1, 2, 3, 4},
		BlockSize: 2, Medium: simengine.MediumGPU, Kind: simengine.KindFullAttention}
	win := simengine.Event{Type: simengine.BlockStored, BlockHashes: []uint64{7, 8}, TokenIDs: []uint32{1, 2, 3, 4},
		BlockSize: 2, Medium: simengine.MediumGPU, GroupIdx: 1, Kind: simengine.KindSlidingWindow, SlidingWindow: 3}
	again := win
	again.BlockHashes, again.TokenIDs, again.ParentHash, again.HasParent = []uint64{8}, []uint32{3, 4}, 7, true
	removed := simengine.Event{Type: simengine.BlockRemoved, BlockHashes: []uint64{8}, Medium: simengine.MediumGPU, GroupIdx: 1}
	var stream []wire.Event
	for seq, b := range [][]simengine.Event{{full, win}, {again}, {removed}, {again}} {
		r.record(uint64(seq), simengine.EventBatch{Events: b})
		for _, ev := range b {
			stream = append(stream, wire.Event{Type: wireType(ev.Type), BlockHashes: ev.BlockHashes, Group: ev.GroupIdx,
				Kind: ev.Kind, SlidingWindow: int64(ev.SlidingWindow), HasSlidingWindow: ev.SlidingWindow > 0})
		}
	}
	_, chunks, ok := r.Snapshot()
	require.True(t, ok)
	dec := wire.NewDecoder(wire.Limits{})
	var snap []wire.Event
	for _, p := range chunks {
		var b wire.Batch
		require.NoError(t, dec.Decode(p, &b))
		for _, e := range b.Events {
			e.BlockHashes = append([]uint64(nil), e.BlockHashes...)
			snap = append(snap, e)
		}
	}
	want := residency(t, stream)
	require.Contains(t, want[[2]uint64{1, 8}], "x2")
	require.Equal(t, want, residency(t, snap))
}

func wireType(t simengine.EventType) wire.EventType {
	if t == simengine.BlockRemoved {
		return wire.EventBlockRemoved
	}
	return wire.EventBlockStored
}
