package kvindex

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEngineBlockSizeRoundsMatchesDown(t *testing.T) {
	ix := newTestIndex(t, Config{})
	toks := seq(1, 10*testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 100, toks)))
	require.NoError(t, ix.Store("b", storeEv("m", 100, toks)))
	require.NoError(t, ix.Store("c", storeEv("m", 100, toks)))
	require.Equal(t, []int{10, 10, 10}, blocksOf(match(ix, "m", toks, "a", "b", "c")))

	ix.SetEngineBlockSize("a", 3*testBS)   // a multiple: whole triples
	ix.SetEngineBlockSize("b", testBS*3/2) // neither divides the other
	ix.SetEngineBlockSize("c", testBS)     // the index's own: no record
	require.Equal(t, 3*testBS, ix.EngineBlockSize("a"))
	require.Equal(t, testBS, ix.EngineBlockSize("c"))
	// a: 10 → 9; b: ⌊10·2/3⌋ = 6 engine blocks = 9 router blocks.
	r := match(ix, "m", toks, "a", "b", "c")
	require.Equal(t, []int{9, 9, 10}, blocksOf(r))
	require.InDelta(t, 9.0, r.Score(0), 1e-9)
	// AddTo (the router's sum over a request's prompts) rounds alike.
	blocks, scores := make([]int, 3), make([]float64, 3)
	r.AddTo(blocks, scores)
	require.Equal(t, []int{9, 9, 10}, blocks)
	require.InDeltaSlice(t, []float64{9, 9, 10}, scores, 1e-9)
	r = match(ix, "m", toks[:8*testBS], "a", "b", "c")
	require.Equal(t, []int{6, 7, 8}, blocksOf(r)) // b: ⌊8·2/3⌋ = 5 engine blocks = 7 router blocks

	// More than 64 candidates take the wide path: same rounding.
	cands := []string{"a", "b", "c"}
	for i := 0; i < 70; i++ {
		cands = append(cands, fmt.Sprintf("x%d", i))
	}
	require.Equal(t, []int{9, 9, 10}, blocksOf(match(ix, "m", toks, cands...))[:3])

	// Clear forgets the record.
	ix.Clear("a")
	require.Equal(t, testBS, ix.EngineBlockSize("a"))
	require.NoError(t, ix.Store("a", storeEv("m", 100, toks)))
	require.Equal(t, 10, match(ix, "m", toks, "a").Blocks(0))
}

func TestEngineBlockSizeScalesExceptions(t *testing.T) {
	ix := newTestIndex(t, Config{TierWeights: map[string]float64{"cpu": 0.5}})
	toks := seq(1, 4*testBS)
	ev := storeEv("m", 100, toks)
	ev.Tier = "cpu"
	require.NoError(t, ix.Store("a", ev))
	ix.SetEngineBlockSize("a", 3*testBS)
	m := match(ix, "m", toks, "a").At(0)
	require.Equal(t, 3, m.Blocks)
	require.Equal(t, 3, m.CPU)
	require.InDelta(t, 1.5, m.Score, 1e-9)
}

// An endpoint with both an engine block size of its own and a sliding-window
// group is limited to a prefix its group allows at the engine-block count,
// not at the raw router count: with engine blocks of two router blocks and a
// window of one router block, a 5-block prompt rounds to 4, and the group,
// which lost the engine block holding router blocks 2 and 3 (the oldest
// freed blocks of a window go first) but kept the one holding 4 and 5, does
// not allow 4. The engine reuses one engine block, 2 router blocks; the
// index said 4.
func TestEngineBlockSizeAndGroupsCompose(t *testing.T) {
	ix := newTestIndex(t, Config{})
	toks := seq(1, 6*testBS)
	require.NoError(t, ix.Store("a", storeEv("m", 100, toks))) // router blocks 0…5, hashes 100…105
	ix.SetEngineBlockSize("a", 2*testBS)
	_, err := ix.StoreGroup("a", &GroupStore{Group: 1, Kind: GroupSlidingWindow, Window: testBS + 1,
		Hashes: []uint64{100, 101, 104, 105}}) // engine blocks 0 and 2
	require.NoError(t, err)
	cands := []string{"a"}
	for i := 0; i < 70; i++ {
		cands = append(cands, fmt.Sprintf("x%d", i))
	}
	for _, cs := range [][]string{cands[:1], cands} {
		require.Equal(t, 2, match(ix, "m", toks[:5*testBS], cs...).Blocks(0), "%d candidates", len(cs))
		require.Equal(t, 6, match(ix, "m", toks, cs...).Blocks(0), "%d candidates", len(cs))
		r := match(ix, "m", toks[:5*testBS], cs...)
		blocks, scores := make([]int, r.Len()), make([]float64, r.Len())
		r.AddTo(blocks, scores)
		require.Equal(t, 2, blocks[0])
	}
}

// A Match racing a Clear of an endpoint whose engine has another block size
// never reports more than its whole engine blocks: Clear forgot the size
// before removing the blocks, so a Match that resolved its candidates in
// between credited the blocks its walk still saw unrounded, beyond the
// last whole engine block.
func TestMatchRacingClearKeepsEngineBlockCap(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 8*testBS)
	// 8 router blocks are 2 whole engine blocks of 3: 6 router blocks.
	// Blocks of another prompt stored first, which Clear removes first,
	// leave the walk time to see the prompt's.
	other := seq(1_000_000, 200*testBS)
	wrong, checked := matchesDuringClear(t, ix, prompt, 60, 6, func() {
		ix.SetEngineBlockSize("a", 3*testBS)
		require.NoError(t, ix.Store("a", storeEv("m", 1000, other)))
		require.NoError(t, ix.Store("a", storeEv("m", 100, prompt)))
	})
	require.Zero(t, wrong, "matches beyond the whole engine blocks, of %d", checked)
}
