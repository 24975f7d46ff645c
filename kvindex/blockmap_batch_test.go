package kvindex

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoadBatchAgreesWithLoad checks loadBatch against Load on a map with
// collisions and tombstones (random inserts and deletes over few keys, so
// many keys sit away from their home slot): for every window of keys, it
// returns the values Load returns, up to the first absent key.
func TestLoadBatchAgreesWithLoad(t *testing.T) {
	m := newBlockMap(11)
	rng := rand.New(rand.NewPCG(3, 4))
	const keys = 3000
	key := func(i uint64) Key { return Key(i * 0x9E3779B97F4A7C15) }
	for op := 0; op < 40_000; op++ {
		k := key(rng.Uint64N(keys))
		n := rng.IntN(4) // 0 deletes
		m.Compute(k, func(blockVal, bool) (blockVal, bool) {
			if n == 0 {
				return blockVal{}, true
			}
			return bmValue(k, n), false
		})
	}
	all := make([]Key, keys+200) // the last 200 were never stored
	for i := range all {
		all[i] = key(uint64(i))
	}
	present, displaced := 0, 0
	var vs [probeBatch]blockVal
	for start := 0; start < len(all); start++ {
		win := all[start:min(start+probeBatch, len(all))]
		got := m.loadBatch(win, &vs)
		want := 0
		for _, k := range win {
			if _, ok := m.Load(k); !ok {
				break
			}
			want++
		}
		require.Equal(t, want, got, "window at %d", start)
		for j := 0; j < got; j++ {
			v, _ := m.Load(win[j])
			require.Equal(t, v, vs[j], "key %d", start+j)
			require.True(t, bmCheck(win[j], vs[j]))
		}
		if _, ok := m.Load(all[start]); ok {
			present++
			sh, h := m.locate(all[start])
			tb := sh.tab.Load()
			if s := tb.slots[homeSlot(h, len(tb.slots))]; s.key != uint64(all[start]) {
				displaced++
			}
		}
	}
	// The test is only meaningful if it exercised the probe beyond the home
	// slot and absent keys inside windows.
	require.Greater(t, displaced, 50, "of %d present keys", present)
	require.Less(t, present, keys)
}
