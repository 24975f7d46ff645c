package kvindex

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEndpointBlocksCountsStoredNotSpeculative(t *testing.T) {
	ix, err := New(Config{BlockSize: 4, SweepInterval: -1}, Options{})
	require.NoError(t, err)
	defer ix.Close()
	require.Zero(t, ix.EndpointBlocks("a"))
	toks := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	require.NoError(t, ix.Store("a", &StoreEvent{EngineHashes: []uint64{1, 2, 3}, Tokens: toks, BlockSize: 4, Model: "m", Group: -1}))
	ix.Speculate("b", Keys(nil, toks, 4, &KeyParams{Model: "m"}), 0)
	require.Equal(t, 3, ix.EndpointBlocks("a"))
	require.Zero(t, ix.EndpointBlocks("b"))
	ix.Clear("a")
	require.Zero(t, ix.EndpointBlocks("a"))
}
