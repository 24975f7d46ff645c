package simengine

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// HybridConfig.GroupOrder numbers the groups as vLLM numbers a model's
// KV-cache groups, by the first layer of each kind: every event carries
// its group's number, the stores of a group numbered before full attention
// precede the full-attention store of the same blocks, the others follow
// it, and what the engine caches and reuses is the same in every order.
func TestHybridGroupOrderNumbersGroupsByFirstLayer(t *testing.T) {
	for _, tc := range []struct {
		order string
		want  map[string]int // group_idx by kv_cache_spec_kind
	}{
		{OrderFullFirst, map[string]int{KindFullAttention: 0, KindSlidingWindow: 1, KindMamba: 2}},
		{OrderWindowFirst, map[string]int{KindSlidingWindow: 0, KindFullAttention: 1, KindMamba: 2}},
		{OrderMambaFirst, map[string]int{KindMamba: 0, KindFullAttention: 1, KindSlidingWindow: 2}},
	} {
		t.Run(tc.order, func(t *testing.T) {
			cfg := Config{NumGPUBlocks: 32, DecodeStep: 1, PrefillTokensPerSecond: 1e6,
				Hybrid: &HybridConfig{SlidingWindow: 6, Mamba: true}}
			base, baseRec := newTestEngine(t, cfg)
			h := *cfg.Hybrid
			h.GroupOrder = tc.order
			cfg.Hybrid = &h
			e, rec := newTestEngine(t, cfg)
			full := tc.want[KindFullAttention]
			var all, baseAll []Event
			var probes [][]uint32
			for i, n := range []int{5 * 4, 2 * 4, 7 * 4, 3 * 4, 5 * 4, 9 * 4, 4 * 4} {
				p := seqTokens(1000*(i%3), n+1)
				probes = append(probes, p)
				want := run(t, base, Request{Prompt: p, MaxTokens: 3})
				got := run(t, e, Request{Prompt: p, MaxTokens: 3})
				require.Equal(t, want.CachedTokens, got.CachedTokens, "request %d", i)
				events := rec.take()
				baseAll = append(baseAll, baseRec.take()...)
				requireStoresInGroupOrder(t, events, full)
				all = append(all, events...)
				res := groupResidency(all)
				require.Equal(t, held(e, e.hy.swa[0]), res[tc.want[KindSlidingWindow]], "request %d: sliding-window group", i)
				require.Equal(t, held(e, e.hy.mamba), res[tc.want[KindMamba]], "request %d: Mamba group", i)
				require.Equal(t, groupResidency(baseAll)[0], res[full], "request %d: full-attention group", i)
			}
			for _, ev := range all {
				if ev.Type == BlockStored {
					require.Equal(t, tc.want[ev.Kind], ev.GroupIdx, "a %s store", ev.Kind)
				}
			}
			for _, p := range probes {
				require.Equal(t, base.CachedTokens(p), e.CachedTokens(p))
			}
		})
	}
}

// requireStoresInGroupOrder checks that a block's stores go out in group
// order around its full-attention store, as vLLM caches a step's blocks
// group by group.
func requireStoresInGroupOrder(t *testing.T, events []Event, full int) {
	t.Helper()
	for j, ev := range events {
		if ev.Type != BlockStored || ev.GroupIdx != full {
			continue
		}
		mine := map[uint64]bool{}
		for _, h := range ev.BlockHashes {
			mine[h] = true
		}
		for k, o := range events {
			if o.Type != BlockStored || o.GroupIdx == full || !mine[o.BlockHashes[0]] {
				continue
			}
			if o.GroupIdx < full {
				require.Less(t, k, j, "group %d's store of a block precedes the full-attention store", o.GroupIdx)
			} else {
				require.Greater(t, k, j, "group %d's store of a block follows the full-attention store", o.GroupIdx)
			}
		}
	}
}

func TestHybridGroupOrderIsValidated(t *testing.T) {
	for _, h := range []HybridConfig{
		{SlidingWindow: 8, GroupOrder: "last"},
		{SlidingWindow: 8, GroupOrder: OrderMambaFirst},
	} {
		_, err := New(Config{Hybrid: &h}, Options{})
		require.True(t, errors.Is(err, ErrBadConfig), "%+v: %v", h, err)
	}
	c, err := Config{Hybrid: &HybridConfig{SlidingWindow: 8}}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, OrderFullFirst, c.Hybrid.GroupOrder)
}
