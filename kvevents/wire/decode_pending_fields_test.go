package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// pendingVLLMHex is a current-vLLM batch carrying the fields of vLLM
// changes still under review, built with python3-msgpack by msgspec's
// rules: BlockStored with event_version and a typed multimodal key that
// names its modality, BlockRemoved with remaining_copy_counts (one count
// per hash), and a BlockInactive event. Also a FuzzDecode seed
// (vllm-open-pr-fields).
const pendingVLLMHex = "93cb41d954fc40200000938ea474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0ad6576656e745f76657273696f6e02aa65787472615f6b657973929184a474797065a26d6da86d6f64616c697479a5696d616765a468617368a5696d672d31ac626c6f636b5f6f666673657402c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6ea86c6f63616c697479a54c4f43414caa73657373696f6e5f6964a6736573732d3185a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788a66d656469756da3475055a967726f75705f69647800b572656d61696e696e675f636f70795f636f756e747392010083a474797065ad426c6f636b496e616374697665ac626c6f636b5f68617368657391cf1122334455667788a66d656469756da347505500"

// TestDecodePendingVLLMFields: none of these may cost the batch. Unknown
// keys are skipped, the typed key keeps its meaning, and an unknown event
// type is counted and skipped while the rest applies. The index counts
// each announced copy of a block, so remaining_copy_counts adds nothing it
// needs.
func TestDecodePendingVLLMFields(t *testing.T) {
	var b wire.Batch
	require.NoError(t, wire.NewDecoder(wire.Limits{}).Decode(wiretest.MustHex(t, pendingVLLMHex), &b))
	require.Len(t, b.Events, 2)
	require.Equal(t, 1, b.UnknownEvents, "BlockInactive")
	st, rm := b.Events[0], b.Events[1]
	require.Equal(t, wire.EventBlockStored, st.Type)
	require.Equal(t, []uint64{wiretest.H1, wiretest.H2}, st.BlockHashes)
	require.Equal(t, wire.ExtraKey{Kind: wire.ExtraKeyMM, Value: "img-1", Offset: 2}, st.ExtraKeys[0][0])
	require.Equal(t, "LOCAL", st.Locality)
	require.Equal(t, "sess-1", st.SessionID)
	require.True(t, st.HasGroup)
	require.Equal(t, "full_attention", st.Kind)
	require.Equal(t, wire.EventBlockRemoved, rm.Type)
	require.Equal(t, []uint64{wiretest.H1, wiretest.H2}, rm.BlockHashes)
	require.Equal(t, "GPU", rm.Medium)
}
