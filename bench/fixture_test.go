package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
)

func TestTokensDeterministicAndDistinct(t *testing.T) {
	a, b := Tokens(1, 512), Tokens(1, 512)
	require.Equal(t, a, b)
	require.NotEqual(t, a, Tokens(2, 512))
	for _, tok := range a {
		require.Less(t, tok, uint32(150000))
	}
	require.Equal(t, a[:100], AppendTokens(nil, 1, 100))
}

func TestStepsAndIDs(t *testing.T) {
	require.Equal(t, []int{1, 11, 21, 32}, Steps(4, 32))
	require.Equal(t, []int{32}, Steps(1, 32))
	ids := EndpointIDs(300)
	require.Equal(t, "10.0.1.43:8000", ids[299])
	seen := map[string]bool{}
	for _, id := range ids {
		require.False(t, seen[id], id)
		seen[id] = true
	}
}

func TestBackgroundAndStaircase(t *testing.T) {
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	defer ix.Close()
	eps := EndpointIDs(8)
	n, err := Background(ix, eps, 1000, 64, 9)
	require.NoError(t, err)
	require.Equal(t, 960, n, "whole chains only")
	st := ix.Stats()
	require.Equal(t, 960, st.Memberships)
	require.Equal(t, 960, st.Blocks, "no block is shared")
	n, err = Background(ix, nil, 1000, 64, 9)
	require.NoError(t, err)
	require.Zero(t, n)

	prompt := Tokens(3, 40*64+10) // a partial tail is ignored
	steps := Steps(len(eps), 40)
	require.NoError(t, Staircase(ix, eps, prompt, steps, 1<<50))
	keys := kvindex.Keys(nil, prompt, 64, &kvindex.KeyParams{Model: Model})
	var out kvindex.MatchResult
	ix.Match(keys, eps, &out)
	for i, e := range out.Endpoints() {
		require.Equal(t, steps[i], e.Blocks, e.Endpoint)
	}
}
