package kvindex

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// vLLM splits a kind with n times as many layers as full attention into n
// groups of its own: Gemma 3 has five sliding-window groups, IBM's Granite
// 4.0-H (36 Mamba layers beside 4 attention ones) nine Mamba groups. Every
// one is tracked and limits Match, the last as the first: a group the
// index refused (it kept eight) left the endpoint credited with prefixes
// that group cannot serve.
func TestEveryGroupOfAKindLimitsMatch(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 12*testBS)
	require.NoError(t, ix.Store("hy:1", storeEv("m", 100, prompt)))
	all := make([]uint64, 12)
	for i := range all {
		all[i] = 100 + uint64(i)
	}
	const groups = 9
	for g := 1; g <= groups; g++ {
		held := all
		if g == groups {
			held = all[:8] // the last group holds the states up to block 8
		}
		_, err := ix.StoreGroup("hy:1", &GroupStore{Group: g, Kind: GroupMamba, Hashes: held})
		require.NoError(t, err, "group %d", g)
	}
	require.Equal(t, []int{8}, blocksOf(match(ix, "m", prompt, "hy:1")))
	for g := 1; g <= 5; g++ { // five window groups beside them
		held := all
		if g == 3 {
			held = all[:6]
		}
		_, err := ix.StoreGroup("hy:1", &GroupStore{Group: groups + g, Kind: GroupSlidingWindow, Window: 2*testBS + 1, Hashes: held})
		require.NoError(t, err, "window group %d", g)
	}
	require.Equal(t, []int{6}, blocksOf(match(ix, "m", prompt, "hy:1")))
}

// Past maxGroupsTracked, an endpoint's groups can no longer all be
// checked: its store is refused (counted as malformed) and the endpoint's
// matches are cut to nothing rather than credited with prefixes the
// untracked group may not serve.
func TestGroupsPastTheBoundCutMatchesToNothing(t *testing.T) {
	ix := newTestIndex(t, Config{})
	prompt := seq(1, 4*testBS)
	require.NoError(t, ix.Store("hy:1", storeEv("m", 100, prompt)))
	hashes := []uint64{100, 101, 102, 103}
	for g := 1; g <= maxGroupsTracked; g++ {
		_, err := ix.StoreGroup("hy:1", &GroupStore{Group: g, Kind: GroupMamba, Hashes: hashes})
		require.NoError(t, err)
	}
	require.Equal(t, []int{4}, blocksOf(match(ix, "m", prompt, "hy:1")))
	_, err := ix.StoreGroup("hy:1", &GroupStore{Group: maxGroupsTracked + 1, Kind: GroupMamba, Hashes: hashes})
	require.ErrorIs(t, err, ErrMalformed)
	require.Equal(t, []int{0}, blocksOf(match(ix, "m", prompt, "hy:1")))
}
