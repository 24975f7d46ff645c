package kvindex

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// AddTo, the router's sum over a request's prompts (Pick), applies the
// non-prefix cache groups' limits as Blocks and Score do, on the path for up
// to 64 candidates as on the wide one: it read the raw full-attention masks,
// so a hybrid endpoint was credited with blocks its sliding-window and Mamba
// groups no longer made usable (hybridsim's "after" error 33.7 → 484.8 tokens).
func TestAddToAppliesGroupLimits(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := hybridSnapIndex(t, ix)
	check := func(cands ...string) {
		t.Helper()
		r := match(ix, "m", prompt, cands...)
		require.Equal(t, []int{9, 12}, blocksOf(r)[:2], "the groups limit the hybrid endpoint")
		blocks, scores := make([]int, r.Len()), make([]float64, r.Len())
		blocks[0], scores[0] = 1, 0.5 // AddTo adds
		r.AddTo(blocks, scores)
		require.Equal(t, []int{1 + 9, 12}, blocks[:2])
		require.InDeltaSlice(t, []float64{0.5 + r.Score(0), r.Score(1)}, scores[:2], 1e-9)
		require.InDelta(t, 9.0, r.Score(0), 1e-9)
	}
	check("hy:1", "plain:1")
	cands := []string{"hy:1", "plain:1"}
	for i := 0; i < 70; i++ { // the wide path
		cands = append(cands, fmt.Sprintf("x%d", i))
	}
	check(cands...)
}
