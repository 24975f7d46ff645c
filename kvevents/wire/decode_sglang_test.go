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
