package kvevents

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// TensorRT-LLM's streaming KV events with multimodal decoding on
// (kv_cache_events.py's BlockStored and MultimodalKey, msgspec's encoding:
// map events in declaration order, None defaults left out, ints in their
// smallest form), block size 4, multimodal token offset 1000. A prompt of
// six text tokens then an image of six tokens, stored in one iteration as
// one event: the image's first token is its digest (a hex string), the
// rest are 1001..1005; mm_keys holds [] for the text block and the image's
// segment for each of the two blocks it covers. Hashes are signed int64.
const (
	trtllmTextThenImage = "93cb41d954fc402000009189a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657393cf1122334455667788d3c5a48362e1d0cfbfcf0a0b0c0d0e0f1011b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739c010203040506d94039663836643038313838346337643635396132666561613063353561643031356133626634663162326230623832326364313564366331356230663030613038cd03e9cd03eacd03ebcd03eccd03edaa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0a76d6d5f6b65797393909184a474797065a66d6d5f6b6579a468617368d94039663836643038313838346337643635396132666561613063353561643031356133626634663162326230623832326364313564366331356230663030613038ac73746172745f6f666673657400a475756964d92036623836623237336666333466636531396436623830346566663561336635379184a474797065a66d6d5f6b6579a468617368d94039663836643038313838346337643635396132666561613063353561643031356133626634663162326230623832326364313564366331356230663030613038ac73746172745f6f666673657402a475756964d920366238366232373366663334666365313964366238303465666635613366353700"
	// The next iteration's store: text after the image, a child of the
	// image's last block.
	trtllmTextAfterImage = "93cb41d954fc406000009189a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391cf2122232425262728b1706172656e745f626c6f636b5f68617368cf0a0b0c0d0e0f1011a9746f6b656e5f696473940708090aaa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0a76d6d5f6b657973919000"
)

// TestApplyTRTLLMTextBeforeImageIndexed: the text blocks in front of an
// image in a TensorRT-LLM store are indexed (a request with that text
// matches them); the image's blocks and their descendants are not, and
// every block left out is counted.
func TestApplyTRTLLMTextBeforeImageIndexed(t *testing.T) {
	f := newApplyFixture(t)
	res := f.applyHex(testEndpoint, trtllmTextThenImage)
	require.Equal(t, wire.EventBlockStored, f.b.Events[0].Type)
	require.True(t, f.b.Events[0].InvalidTokens)
	require.Equal(t, 6, f.b.Events[0].InvalidTokenAt, "the digest follows six text tokens")
	require.Equal(t, ApplyResult{Stored: 1, StoredBlocks: 1, SkippedBlocks: 2}, res)
	require.Equal(t, 1.0, skipped(t, f.reg, "none", skipInvalidTokens))

	text := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	require.Equal(t, 1, f.match(testEndpoint, text, kvindex.KeyParams{}).Blocks,
		"the first block is text only; the second holds the image's start")

	res = f.applyHex(testEndpoint, trtllmTextAfterImage)
	require.Equal(t, 1, res.ParentMissing, "a store under the image has no indexed parent")
	require.Equal(t, 1, f.match(testEndpoint, text, kvindex.KeyParams{}).Blocks)

	// A store whose first block holds a digest is skipped whole, as
	// SGLang's EAGLE bigram stores (pairs from the first token on) are.
	f2 := newApplyFixture(t)
	imageFirst := wire.Event{Type: wire.EventBlockStored, BlockHashes: []uint64{7, 8},
		TokenIDs: []uint32{1001, 1002, 1003, 1, 2, 3, 4}, BlockSize: 4, Medium: "GPU",
		InvalidTokens: true, InvalidTokenAt: 0}
	res = f2.a.Apply(testEndpoint, "", &wire.Batch{Events: []wire.Event{imageFirst}})
	require.Equal(t, ApplyResult{Skipped: 1, SkippedBlocks: 2}, res)
	require.Equal(t, 1.0, skipped(t, f2.reg, "none", skipInvalidTokens))
}
