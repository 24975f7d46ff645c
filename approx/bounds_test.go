package approx

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
)

// Many prompts over many endpoints, each endpoint's capacity far above the
// byte bound: the accounted bytes never pass Config.MaxBytes, every endpoint
// keeps its share, and the live entries never pass the accounted slots.
func TestByteBoundUnderManyPrompts(t *testing.T) {
	const maxBytes = 256 << 10 // 4,096 slots
	ix, _ := newTest(t, Config{Enabled: true, MaxBytes: maxBytes, Capacity: Capacity{GPUBlocks: 1 << 20, BlockSize: 64}}, nil)
	ids := []string{"e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7"}
	rng := rand.New(rand.NewPCG(1, 2))
	prompt := make([]kvindex.Key, 0, 64)
	for i := 0; i < 20000; i++ {
		prompt = prompt[:0]
		sys := kvindex.Key(rng.IntN(50) + 1) // a few shared beginnings
		prompt = append(prompt, sys)
		for n := rng.IntN(60); n > 0; n-- {
			prompt = append(prompt, kvindex.Key(rng.Uint64()))
		}
		// the first endpoints get most of the traffic, the last ones join late
		id := ids[min(rng.IntN(len(ids)), i/2000)]
		ix.Record(id, prompt)
		st := ix.Stats()
		require.LessOrEqual(t, st.Bytes, int64(maxBytes), "after prompt %d", i)
		require.LessOrEqual(t, int64(st.Entries)*slotBytes, st.Bytes)
	}
	st := ix.Stats()
	require.Equal(t, len(ids), st.Endpoints)
	require.Greater(t, st.Bytes, int64(maxBytes)*3/4, "the bound is used, not left idle")
	for _, id := range ids {
		require.Greater(t, ix.Entries(id), 0, id)
		require.LessOrEqual(t, ix.Entries(id), maxBytes/slotBytes/len(ids), id)
	}
	// a shared beginning still matches where it was routed recently
	require.Positive(t, ix.Match("e0", prompt[:1])+ix.Match("e7", prompt[:1]))
}
