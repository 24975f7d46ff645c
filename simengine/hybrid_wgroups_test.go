package simengine

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// HybridConfig.WindowGroups splits the window into several groups as vLLM
// splits Gemma 3's window layers: numbered one after the other where the
// window's first layer puts them, each publishing stores and removals that
// tell a subscriber exactly what it holds, and the stores of a step going
// out in group order around the full-attention store.
func TestHybridWindowGroupsAreNumberedAsVLLMSplitsLayers(t *testing.T) {
	for _, tc := range []struct {
		order         string
		window        []int
		full, mambaAt int
	}{
		{OrderFullFirst, []int{1, 2, 3, 4, 5}, 0, 6},
		{OrderWindowFirst, []int{0, 1, 2, 3, 4}, 5, 6},
		{OrderMambaFirst, []int{2, 3, 4, 5, 6}, 1, 0},
	} {
		t.Run(tc.order, func(t *testing.T) {
			e, rec := newTestEngine(t, Config{NumGPUBlocks: 72, DecodeStep: 1, PrefillTokensPerSecond: 1e6,
				Hybrid: &HybridConfig{SlidingWindow: 6, WindowGroups: 5, Mamba: true, GroupOrder: tc.order}})
			var all []Event
			partial := 0
			for i, n := range []int{5 * 4, 2 * 4, 7 * 4, 3 * 4, 5 * 4, 9 * 4} {
				run(t, e, Request{Prompt: seqTokens(1000*(i%3), n+1), MaxTokens: 2})
				events := rec.take()
				requireStoresInGroupOrder(t, events, tc.full)
				all = append(all, events...)
				res := groupResidency(all)
				for j, g := range e.hy.swa {
					require.Equal(t, tc.window[j], g.group)
					require.Equal(t, held(e, g), res[g.group], "request %d: window group %d", i, g.group)
					if len(held(e, g)) != len(held(e, e.hy.swa[0])) {
						partial++
					}
				}
				require.Equal(t, held(e, e.hy.mamba), res[tc.mambaAt], "request %d: Mamba group", i)
			}
			kinds := map[int]string{}
			for _, ev := range all {
				if ev.Type == BlockStored {
					kinds[ev.GroupIdx] = ev.Kind
					if ev.Kind == KindSlidingWindow {
						require.Equal(t, 6, ev.SlidingWindow)
					}
				}
			}
			want := map[int]string{tc.full: KindFullAttention, tc.mambaAt: KindMamba}
			for _, g := range tc.window {
				want[g] = KindSlidingWindow
			}
			require.Equal(t, want, kinds)
			require.NotZero(t, partial, "the shared window cache left some window group short of the others")
		})
	}
}

// A cached prefix is reused only when every window group holds its
// window: one group missing a block the others hold cuts the hit short,
// as vLLM's find_longest_cache_hit asks every group of the kind for it.
func TestHybridEveryWindowGroupMustHoldTheWindow(t *testing.T) {
	e, _ := newTestEngine(t, Config{NumGPUBlocks: 64, DecodeStep: 1, PrefillTokensPerSecond: 1e6,
		Hybrid: &HybridConfig{SlidingWindow: 6, WindowGroups: 3}})
	p := seqTokens(7, 6*4+1)
	run(t, e, Request{Prompt: p, MaxTokens: 1})
	require.Equal(t, 6*4, e.CachedTokens(p))
	e.mu.Lock()
	bs, parent := e.cfg.BlockSize, NoneHash
	for i := 0; i <= 5; i++ {
		parent = e.hasher.hash(parent, p[i*bs:(i+1)*bs], nil)
	}
	k := gkey{e.hy.swa[2].group, parent}
	dropCached(t, e.pool, k) // the last window group's block 5
	e.mu.Unlock()
	// Blocks 4 and 5 make the window of a 6-block prefix, 3 and 4 that of
	// a 5-block one, which every group still holds.
	require.Equal(t, 5*4, e.CachedTokens(p))
}

func TestHybridWindowGroupsAreValidated(t *testing.T) {
	for _, h := range []HybridConfig{
		{SlidingWindow: 8, WindowGroups: -1},
		{SlidingWindow: 8, WindowGroups: maxWindowGroups + 1},
		{SlidingWindow: 8, WindowGroups: 64 << 20},
	} {
		_, err := New(Config{Hybrid: &h}, Options{})
		require.True(t, errors.Is(err, ErrBadConfig), "%+v: %v", h, err)
	}
	c, err := Config{Hybrid: &HybridConfig{SlidingWindow: 8}}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, 1, c.Hybrid.WindowGroups)
}
