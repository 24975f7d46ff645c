package kvevents

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvindex"
)

// TestDynamoBlockMMInfosKeyImageBlocks: Dynamo's TensorRT-LLM relay
// names an image block's item only in block_mm_infos, beside placeholder
// token IDs every image shares. The block must be keyed by its item: a
// request with that image matches it, one with another image or none at
// the same place matches only the text block before it.
func TestDynamoBlockMMInfosKeyImageBlocks(t *testing.T) {
	const img = 151655 // the model's image placeholder token
	toks := []uint32{1, 2, 3, 4, img, img, img, img}
	e := map[string]any{
		"type": "BlockStored", "block_hashes": []any{wiretest.H1, wiretest.H2}, "parent_block_hash": nil,
		"token_ids": []any{1, 2, 3, 4, img, img, img, img}, "block_size": 4,
		"block_mm_infos": []any{nil, map[string]any{"mm_objects": []any{
			map[string]any{"mm_hash": uint64(0x9f86d081884c7d65), "offsets": []any{}},
		}}},
	}
	f := newApplyFixture(t)
	require.Equal(t, 1, f.applyRaw(testEndpoint, mapBatch(t, e)).Stored)

	item := func(hash string) kvindex.KeyParams {
		return kvindex.KeyParams{MM: []kvindex.MMItem{{Hash: hash, Offset: 4, Length: 4}}}
	}
	require.Equal(t, 2, f.match(testEndpoint, toks, item("9f86d081884c7d65")).Blocks, "the stored image")
	require.Equal(t, 1, f.match(testEndpoint, toks, item("0123456789abcdef")).Blocks, "another image")
	require.Equal(t, 1, f.match(testEndpoint, toks, kvindex.KeyParams{}).Blocks, "no image")
}
