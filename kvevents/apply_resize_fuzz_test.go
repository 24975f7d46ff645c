package kvevents

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// FuzzApplyResized drives the Applier with events of block sizes other than
// the index's, built from the input: stores chained on earlier hashes (or
// on unknown ones), tier-only stores, removals, clears, extra keys and
// sliding-window and Mamba groups' stores and removals. It
// must never panic, keep the remembered blocks within their bound, and
// keep Match within the keys asked.
func FuzzApplyResized(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{2, 9, 1, 0, 2, 9, 1, 1, 3, 1, 3, 2, 1, 1, 4})
	f.Add([]byte{5, 200, 17, 5, 201, 18, 7, 1, 6, 5, 202, 3, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		ix, err := kvindex.New(kvindex.Config{BlockSize: 4, SweepInterval: -1}, kvindex.Options{})
		require.NoError(t, err)
		defer ix.Close()
		const maxSide = 8
		a, err := NewApplier(ApplierConfig{Model: "m", MaxResizedBlocksPerEndpoint: maxSide}, ix, Options{})
		require.NoError(t, err)
		sizes := [...]int{1, 2, 3, 4, 5, 6, 8, 12}
		next := func() int {
			if len(in) == 0 {
				return 0
			}
			b := in[0]
			in = in[1:]
			return int(b)
		}
		var hashes []uint64
		var all []uint32
		for len(in) > 0 {
			op, bs := next()%8, sizes[next()%len(sizes)]
			e := wire.Event{BlockSize: bs, Medium: "GPU", HasGroup: true, Kind: "full_attention"}
			switch op {
			case 0, 1, 2: // store of 1..4 blocks, chained on a known hash or none
				e.Type = wire.EventBlockStored
				n := 1 + next()%4
				if p := next(); p%3 != 0 && len(hashes) > 0 {
					e.ParentHash, e.HasParent = hashes[p%len(hashes)], true
				} else if p%7 == 6 {
					e.ParentHash, e.HasParent = uint64(p)<<40, true // unknown
				}
				for i := 0; i < n; i++ {
					h := uint64(len(hashes)+1)*0x1000 + uint64(next())
					e.BlockHashes = append(e.BlockHashes, h)
					hashes = append(hashes, h)
				}
				for i := 0; i < n*bs; i++ {
					e.TokenIDs = append(e.TokenIDs, uint32(next()%5))
				}
				all = append(all, e.TokenIDs...)
				if next()%5 == 0 {
					e.ExtraKeys = make([][]wire.ExtraKey, n)
					e.ExtraKeys[next()%n] = []wire.ExtraKey{{Kind: wire.ExtraKeyString, Value: "k"}}
				}
			case 3: // tier-only store
				e.Type, e.Medium = wire.EventBlockStored, "CPU"
				if len(hashes) > 0 {
					e.BlockHashes = []uint64{hashes[next()%len(hashes)]}
				} else {
					e.BlockHashes = []uint64{7}
				}
			case 4: // removal
				e.Type = wire.EventBlockRemoved
				if len(hashes) > 0 {
					e.BlockHashes = []uint64{hashes[next()%len(hashes)]}
				} else {
					e.BlockHashes = []uint64{9}
				}
			case 5:
				e = wire.Event{Type: wire.EventAllBlocksCleared}
			default: // a sliding-window or Mamba group's store or removal
				e.Group, e.Kind = 1+next()%2, "sliding_window"
				if e.Group == 2 {
					e.Kind = "mamba"
				} else {
					e.SlidingWindow, e.HasSlidingWindow = int64(next()%20), true
				}
				e.Type = wire.EventBlockStored
				if op == 7 {
					e.Type, e.Kind = wire.EventBlockRemoved, ""
				}
				if len(hashes) > 0 {
					e.BlockHashes = []uint64{hashes[next()%len(hashes)]}
				} else {
					e.BlockHashes = []uint64{11}
				}
			}
			a.Apply(testEndpoint, "", &wire.Batch{Events: []wire.Event{e}})
			require.LessOrEqual(t, a.state(testEndpoint).side.len(), maxSide)
		}
		keys := kvindex.Keys(nil, all, 4, &kvindex.KeyParams{Model: "m"})
		var out kvindex.MatchResult
		ix.Match(keys, []string{testEndpoint}, &out)
		require.LessOrEqual(t, out.Blocks(0), len(keys))
		require.GreaterOrEqual(t, out.Blocks(0), 0)
	})
}
