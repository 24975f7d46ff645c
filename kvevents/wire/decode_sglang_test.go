package wire_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// TestDecodeSGLangMapEvents: SGLang's map events carry cache_salt as a
// field of BlockStored itself. The salt keys the block like the positional
// metadata map's salt (S2), so it must reach Event.CacheSalt: dropped, a
// salted block would be indexed under the unsalted key and match requests
// of another salt.
func TestDecodeSGLangMapEvents(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	var b wire.Batch
	require.NoError(t, d.Decode(wiretest.MustHex(t, wiretest.S3Hex), &b))
	requireBatchEqual(t, wiretest.WantS3(), &b)
	require.Equal(t, "salt-A", b.Events[0].CacheSalt)
	require.Equal(t, "sess-1", b.Events[0].SessionID)
	require.Empty(t, b.Events[1].CacheSalt, "an unsalted store leaves the key out")

	var s2 wire.Batch
	require.NoError(t, d.Decode(wiretest.MustHex(t, vectorHex(t, "S2/sglang")), &s2))
	require.Equal(t, s2.Events[0].CacheSalt, b.Events[0].CacheSalt, "same salt as the positional form")
}

// TestDecodeSGLangMapCacheSaltTypeConfused: a cache_salt that is neither a
// string nor nil cannot key the block, so the batch is rejected like a
// type-confused lora_name, never applied without its salt.
func TestDecodeSGLangMapCacheSaltTypeConfused(t *testing.T) {
	payload := []byte{0x93, 0x00, 0x91, 0x82,
		0xa4, 't', 'y', 'p', 'e', 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd',
		0xaa, 'c', 'a', 'c', 'h', 'e', '_', 's', 'a', 'l', 't', 0x05,
		0x00}
	de := decodeErr(t, wire.NewDecoder(wire.Limits{}), payload)
	require.ErrorIs(t, de, wire.ErrMalformed)
}

// sglangMapScript encodes S3 from SGLang's event declarations the way
// msgspec does (tag first, declaration order, None defaults omitted, array
// batch), with Debian's python3-msgpack.
const sglangMapScript = `
import msgpack
A, B = -3488128144981237669, 5674439469042975057
events = [
    {"type": "BlockStored", "block_hashes": [A], "parent_block_hash": None,
     "token_ids": [1, 2, 3, 4], "block_size": 4, "lora_id": None, "medium": "GPU",
     "cache_salt": "salt-A", "session_id": "sess-1"},
    {"type": "BlockStored", "block_hashes": [B], "parent_block_hash": A,
     "token_ids": [5, 6, 7, 8], "block_size": 4, "lora_id": None, "medium": "GPU"},
    {"type": "BlockRemoved", "block_hashes": [B], "medium": "GPU"},
    {"type": "AllBlocksCleared"},
]
print(msgpack.packb([1700000000.5, events, 0], use_bin_type=True).hex())
`

// TestSGLangMapPayloadMatchesPythonMsgpack checks that S3Hex is what
// python3-msgpack writes for SGLang's declarations. Skipped without
// python3-msgpack unless KVROUTE_REQUIRE_INTEROP=1.
func TestSGLangMapPayloadMatchesPythonMsgpack(t *testing.T) {
	pytest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := pytest.Run(ctx, sglangMapScript)
	require.NoError(t, err, "%s", out)
	require.Equal(t, wiretest.S3Hex, strings.TrimSpace(string(out)))
}

// vectorHex returns the hex of the golden vector name.
func vectorHex(t *testing.T, name string) string {
	t.Helper()
	for _, v := range wiretest.Vectors() {
		if v.Name == name {
			return v.Hex
		}
	}
	t.Fatalf("no vector %s", name)
	return ""
}

// TestDecodeSGLangAlignedLayout: SGLang's vLLM-aligned positional events
// carry a salted store's cache_salt in a metadata map past every vLLM
// position (the 15th element) and mirror it into extra_keys as
// "dynamo-cache-salt:<salt>". The salt must reach Event.CacheSalt, and the
// mirror must not stay an extra key: left there, it would key every salted
// store, children included, with a prefixed salt no request carries, so
// salted requests would never match the engine's blocks.
func TestDecodeSGLangAlignedLayout(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	var b wire.Batch
	require.NoError(t, d.Decode(wiretest.MustHex(t, wiretest.S4Hex), &b))
	requireBatchEqual(t, wiretest.WantS4(), &b)
	for i := range 2 {
		require.Equal(t, "salt-A", b.Events[i].CacheSalt, "store %d", i)
		require.Len(t, b.Events[i].ExtraKeys, 1, "one entry per block")
		require.Empty(t, b.Events[i].ExtraKeys[0], "the mirror of the salt is not a key")
	}
}

// TestDecodeSGLangAlignedKeepsOtherKeys: only the exact mirror of the
// event's own salt is dropped; another key, or a prefixed string naming
// another salt, stays a key of its block.
func TestDecodeSGLangAlignedKeepsOtherKeys(t *testing.T) {
	e := wiretest.WantS4().Events[0]
	e.ExtraKeys = [][]wire.ExtraKey{{
		{Kind: wire.ExtraKeyString, Value: "dynamo-cache-salt:salt-A"},
		{Kind: wire.ExtraKeyString, Value: "dynamo-cache-salt:salt-B"},
		{Kind: wire.ExtraKeyMM, Value: "img", Offset: 1},
	}}
	var b wire.Batch
	require.NoError(t, wire.NewDecoder(wire.Limits{}).Decode(wire.AppendBatch(nil, wiretest.BatchOf(0, true, e), wire.FormatVLLMLegacy), &b))
	require.Empty(t, b.Events[0].CacheSalt, "the legacy vLLM layout has no metadata: nothing is dropped")
	require.Len(t, b.Events[0].ExtraKeys[0], 3)

	// The same keys with the metadata map after the vLLM positions.
	payload := wiretest.MustHex(t, wiretest.S4Hex)
	mirror := []byte("\x91\x91\xb8dynamo-cache-salt:salt-A")
	i := bytes.Index(payload, mirror)
	require.Positive(t, i)
	keys := append([]byte("\x91\x93\xb8dynamo-cache-salt:salt-A\xb8dynamo-cache-salt:salt-B\x92\xa3img\x01"), payload[i+len(mirror):]...)
	payload = append(payload[:i:i], keys...)
	require.NoError(t, wire.NewDecoder(wire.Limits{}).Decode(payload, &b))
	require.Equal(t, "salt-A", b.Events[0].CacheSalt)
	require.Equal(t, []wire.ExtraKey{
		{Kind: wire.ExtraKeyString, Value: "dynamo-cache-salt:salt-B"},
		{Kind: wire.ExtraKeyMM, Value: "img", Offset: 1},
	}, b.Events[0].ExtraKeys[0])
}

// sglangAlignedScript encodes S4 from SGLang's vLLM-aligned declarations
// the way msgspec does for array_like structs (tag first, every field in
// declaration order, None included, the metadata struct a map), with
// Debian's python3-msgpack.
const sglangAlignedScript = `
import msgpack
A, B = -3488128144981237669, 5674439469042975057
mirror = [["dynamo-cache-salt:salt-A"]]
meta = {"cache_salt": "salt-A"}
events = [
    ["BlockStored", [A], None, [1, 2, 3, 4], 4, None, "GPU", None, mirror, None, None, None, None, None, meta],
    ["BlockStored", [B], A, [5, 6, 7, 8], 4, None, "GPU", None, mirror, None, None, None, None, None, meta],
    ["BlockRemoved", [B], "GPU", None, None, None, None, None],
    ["AllBlocksCleared", None],
]
print(msgpack.packb([1700000000.5, events, 0], use_bin_type=True).hex())
`

// TestSGLangAlignedPayloadMatchesPythonMsgpack checks that S4Hex is what
// python3-msgpack writes for SGLang's vLLM-aligned declarations. Skipped
// without python3-msgpack unless KVROUTE_REQUIRE_INTEROP=1.
func TestSGLangAlignedPayloadMatchesPythonMsgpack(t *testing.T) {
	pytest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := pytest.Run(ctx, sglangAlignedScript)
	require.NoError(t, err, "%s", out)
	require.Equal(t, wiretest.S4Hex, strings.TrimSpace(string(out)))
}
