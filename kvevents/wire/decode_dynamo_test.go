package wire_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// dynamoMMHex is a BlockStored as NVIDIA Dynamo's TensorRT-LLM relay
// (ZmqKvEventPublisher.publish_stored, the stream its KV event consolidator
// subscribes to) writes it: a python dict in insertion order packed by
// msgpack.packb(use_bin_type=True) into [ts, [event], attention_dp_rank].
// Block 0 is text; block 1 holds image placeholder tokens (151655) and
// carries one block_mm_infos object, mm_hash being the first 16 hex digits
// of the engine's item digest and offsets empty, as Dynamo fills them.
const dynamoMMHex = "93cb41d954fc40200000" + "91" + "86" +
	"a474797065ab426c6f636b53746f726564" +
	"ac626c6f636b5f68617368657392cf0a3f1c2d4e5b6a79d3eeddccbbaa998878" +
	"b1706172656e745f626c6f636b5f68617368c0" +
	"a9746f6b656e5f6964739801020304ce00025067ce00025067ce00025067ce00025067" +
	"aa626c6f636b5f73697a6504" +
	"ae626c6f636b5f6d6d5f696e666f7392c081aa6d6d5f6f626a656374739182a76d6d5f68617368cf9f86d081884c7d65a76f666673657473" +
	"90" +
	"00"

// dynamoMMScript builds dynamoMMHex the way Dynamo's relay does, with
// Debian's python3-msgpack.
const dynamoMMScript = `
import msgpack
event = {"type": "BlockStored", "block_hashes": [0x0A3F1C2D4E5B6A79, -0x1122334455667788],
         "parent_block_hash": None, "token_ids": [1, 2, 3, 4] + [151655] * 4, "block_size": 4}
digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
event["block_mm_infos"] = [None, {"mm_objects": [{"mm_hash": int(digest[:16], 16), "offsets": []}]}]
print(msgpack.packb([1700000000.5, [event], 0], use_bin_type=True).hex())
`

// wantDynamoMM is dynamoMMHex decoded: the image block keyed by its item.
func wantDynamoMM() *wire.Batch {
	return wiretest.BatchOf(0, true, wire.Event{
		Type:         wire.EventBlockStored,
		BlockHashes:  []uint64{0x0a3f1c2d4e5b6a79, 0xeeddccbbaa998878},
		SignedHashes: true,
		TokenIDs:     []uint32{1, 2, 3, 4, 151655, 151655, 151655, 151655},
		BlockSize:    4,
		ExtraKeys:    [][]wire.ExtraKey{nil, {{Kind: wire.ExtraKeyMM, Value: "9f86d081884c7d65"}}},
	})
}

// TestDecodeDynamoBlockMMInfos: Dynamo's relay writes a multimodal block's
// item in block_mm_infos only, beside placeholder token IDs every image
// shares. Skipped, the block would be keyed by those placeholders alone
// and match any request with another image at the same place.
func TestDecodeDynamoBlockMMInfos(t *testing.T) {
	var b wire.Batch
	require.NoError(t, wire.NewDecoder(wire.Limits{}).Decode(wiretest.MustHex(t, dynamoMMHex), &b))
	requireBatchEqual(t, wantDynamoMM(), &b)
}

// TestDynamoMMPayloadMatchesPythonMsgpack checks that dynamoMMHex is what
// python3-msgpack writes for Dynamo's dict. Skipped without python3-msgpack
// unless KVROUTE_REQUIRE_INTEROP=1.
func TestDynamoMMPayloadMatchesPythonMsgpack(t *testing.T) {
	pytest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := pytest.Run(ctx, dynamoMMScript)
	require.NoError(t, err, "%s", out)
	require.Equal(t, dynamoMMHex, strings.TrimSpace(string(out)))
}

// TestDecodeDynamoBlockMMInfosPositional: Dynamo's positional producers
// put block_mm_infos (a list) where vLLM's array BlockStored has group_idx
// (lib/kv-router/src/zmq_wire.rs reads either there). Such an event
// decodes with its multimodal keys after its extra_keys instead of failing
// the batch as a type-confused group_idx.
func TestDecodeDynamoBlockMMInfosPositional(t *testing.T) {
	payload := []byte{0x93, 0x00, 0x91,
		0x9a, 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd',
		0x91, 0x07, // block_hashes
		0xc0,                         // parent_block_hash
		0x94, 0x01, 0x02, 0x03, 0x04, // token_ids
		0x04,                // block_size
		0xc0,                // lora_id
		0xa3, 'G', 'P', 'U', // medium
		0xc0,                  // lora_name
		0x91, 0x91, 0xa1, 's', // extra_keys: [["s"]]
		0x91, 0x81, 0xaa, 'm', 'm', '_', 'o', 'b', 'j', 'e', 'c', 't', 's', // block_mm_infos
		0x91, 0x81, 0xa7, 'm', 'm', '_', 'h', 'a', 's', 'h', 0x2a,
		0x00}
	var b wire.Batch
	require.NoError(t, wire.NewDecoder(wire.Limits{}).Decode(payload, &b))
	require.Len(t, b.Events, 1)
	e := b.Events[0]
	require.False(t, e.HasGroup)
	require.Equal(t, [][]wire.ExtraKey{{{Kind: wire.ExtraKeyString, Value: "s"}, {Kind: wire.ExtraKeyMM, Value: "000000000000002a"}}}, e.ExtraKeys)
}

// TestDecodeDynamoBlockMMInfosOtherShapes: an entry that is not the
// mm_objects shape neither fails the batch nor leaves its block keyless:
// it keys the block as an extra_keys element of that form would, so the
// block never matches a text-only one.
func TestDecodeDynamoBlockMMInfosOtherShapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		entry []byte
		want  wire.ExtraKey
	}{
		{"string mm_hash", []byte{0x81, 0xaa, 'm', 'm', '_', 'o', 'b', 'j', 'e', 'c', 't', 's', 0x91, 0x81, 0xa7, 'm', 'm', '_', 'h', 'a', 's', 'h', 0xa1, 'x'},
			wire.ExtraKey{Kind: wire.ExtraKeyOpaque, Value: "81aa6d6d5f6f626a656374739181a76d6d5f68617368a178"}},
		{"no mm_hash", []byte{0x81, 0xaa, 'm', 'm', '_', 'o', 'b', 'j', 'e', 'c', 't', 's', 0x91, 0x80},
			wire.ExtraKey{Kind: wire.ExtraKeyOpaque, Value: "81aa6d6d5f6f626a656374739180"}},
		{"no mm_objects", []byte{0x80}, wire.ExtraKey{Kind: wire.ExtraKeyOpaque, Value: "80"}},
		{"a string", []byte{0xa3, 'i', 'm', 'g'}, wire.ExtraKey{Kind: wire.ExtraKeyString, Value: "img"}},
		{"an integer", []byte{0x05}, wire.ExtraKey{Kind: wire.ExtraKeyOpaque, Value: "05"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := append([]byte{0x93, 0x00, 0x91, 0x85,
				0xa4, 't', 'y', 'p', 'e', 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd',
				0xac, 'b', 'l', 'o', 'c', 'k', '_', 'h', 'a', 's', 'h', 'e', 's', 0x91, 0x07,
				0xa9, 't', 'o', 'k', 'e', 'n', '_', 'i', 'd', 's', 0x92, 0x01, 0x02,
				0xaa, 'b', 'l', 'o', 'c', 'k', '_', 's', 'i', 'z', 'e', 0x02,
				0xae, 'b', 'l', 'o', 'c', 'k', '_', 'm', 'm', '_', 'i', 'n', 'f', 'o', 's', 0x91}, tc.entry...)
			payload = append(payload, 0x00)
			var b wire.Batch
			require.NoError(t, wire.NewDecoder(wire.Limits{}).Decode(payload, &b))
			require.Len(t, b.Events, 1)
			require.Equal(t, [][]wire.ExtraKey{{tc.want}}, b.Events[0].ExtraKeys)
		})
	}
}

// TestDecodeDynamoBlockMMInfosLimit: block_mm_infos is bounded like
// extra_keys, by MaxHashesPerEvent, before anything is allocated for it.
func TestDecodeDynamoBlockMMInfosLimit(t *testing.T) {
	payload := []byte{0x93, 0x00, 0x91, 0x82,
		0xa4, 't', 'y', 'p', 'e', 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd',
		0xae, 'b', 'l', 'o', 'c', 'k', '_', 'm', 'm', '_', 'i', 'n', 'f', 'o', 's', 0x93, 0xc0, 0xc0, 0xc0,
		0x00}
	de := decodeErr(t, wire.NewDecoder(wire.Limits{MaxHashesPerEvent: 2}), payload)
	require.ErrorIs(t, de, wire.ErrLimit)
	require.Equal(t, "block_mm_infos", de.Field)
}

// TestDecodeMultimodalKeysBeforeExtraKeys: map events may come in any key
// order. A block_mm_infos or mm_keys read before extra_keys keeps its
// multimodal keys, after the block's extra keys as in the usual order;
// lost, the image block would be keyed by its placeholder tokens alone.
func TestDecodeMultimodalKeysBeforeExtraKeys(t *testing.T) {
	head := []byte{0x93, 0x00, 0x91, 0x84,
		0xa4, 't', 'y', 'p', 'e', 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd',
		0xac, 'b', 'l', 'o', 'c', 'k', '_', 'h', 'a', 's', 'h', 'e', 's', 0x91, 0x07}
	extra := []byte{0xaa, 'e', 'x', 't', 'r', 'a', '_', 'k', 'e', 'y', 's', 0x91, 0x91, 0xa1, 's'}
	for _, tc := range []struct {
		name string
		mm   []byte
		want wire.ExtraKey
	}{
		{"block_mm_infos", []byte{0xae, 'b', 'l', 'o', 'c', 'k', '_', 'm', 'm', '_', 'i', 'n', 'f', 'o', 's',
			0x91, 0x81, 0xaa, 'm', 'm', '_', 'o', 'b', 'j', 'e', 'c', 't', 's', 0x91, 0x81, 0xa7, 'm', 'm', '_', 'h', 'a', 's', 'h', 0x2a},
			wire.ExtraKey{Kind: wire.ExtraKeyMM, Value: "000000000000002a"}},
		{"mm_keys", []byte{0xa7, 'm', 'm', '_', 'k', 'e', 'y', 's',
			0x91, 0x91, 0x83, 0xa4, 't', 'y', 'p', 'e', 0xa6, 'm', 'm', '_', 'k', 'e', 'y',
			0xa4, 'h', 'a', 's', 'h', 0xa3, 'i', 'm', 'g', 0xac, 's', 't', 'a', 'r', 't', '_', 'o', 'f', 'f', 's', 'e', 't', 0x01},
			wire.ExtraKey{Kind: wire.ExtraKeyMM, Value: "img", Offset: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := append(append(append(append([]byte{}, head...), tc.mm...), extra...), 0x00)
			var b wire.Batch
			require.NoError(t, wire.NewDecoder(wire.Limits{}).Decode(payload, &b))
			require.Equal(t, [][]wire.ExtraKey{{{Kind: wire.ExtraKeyString, Value: "s"}, tc.want}}, b.Events[0].ExtraKeys)
		})
	}
}
