package wire_test

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// TestDecodeKeysAllocateInProportion: a block's extra keys may be a
// byte each on the wire (empty strings) and 32 bytes each decoded. Their
// slice is sized once from the header, which was checked against the bytes
// remaining, so a payload of such keys makes the decoder allocate about 32
// times its size. Grown key by key, the copies made on the way allocated
// more than 150 times its size (over a gigabyte for an 8 MiB payload).
// Events, blocks' key lists and raw hashes are sized once likewise.
func TestDecodeKeysAllocateInProportion(t *testing.T) {
	const keys = 1 << 20
	emptyKeys := func(dst []byte) []byte {
		dst = binary.BigEndian.AppendUint32(append(dst, 0x91, 0xdd), keys) // one block, its keys
		for range keys {
			dst = append(dst, 0xa0) // ""
		}
		return dst
	}
	head := func(fields int) []byte {
		p := []byte{0x93, 0x00, 0x91, 0x80 | byte(fields), 0xa4, 't', 'y', 'p', 'e', 0xab}
		p = append(p, "BlockStored"...)
		return append(p, 0xac, 'b', 'l', 'o', 'c', 'k', '_', 'h', 'a', 's', 'h', 'e', 's', 0x91, 0x01)
	}
	extra := emptyKeys(append(head(3), 0xaa, 'e', 'x', 't', 'r', 'a', '_', 'k', 'e', 'y', 's'))
	mm := emptyKeys(append(head(3), 0xa7, 'm', 'm', '_', 'k', 'e', 'y', 's'))
	perBlock := func(field string, entry []byte) []byte {
		p := append(append(head(3), 0xa0|byte(len(field))), field...)
		p = binary.BigEndian.AppendUint32(append(p, 0xdd), keys)
		for range keys {
			p = append(p, entry...)
		}
		return p
	}
	const events = keys / 4
	cleared := binary.BigEndian.AppendUint32([]byte{0x93, 0x00, 0xdd}, events) // AllBlocksCleared × events
	for range events {
		cleared = append(append(cleared, 0x91, 0xb0), "AllBlocksCleared"...)
	}
	rawHashes := binary.BigEndian.AppendUint32(append(head(2)[:len(head(2))-2], 0xdd), keys)
	for range keys {
		rawHashes = append(rawHashes, 0xc4, 0x00) // empty bin hashes
	}
	for name, payload := range map[string][]byte{
		"extra_keys": extra, "mm_keys": mm, "events": cleared, "raw hashes": rawHashes,
		"extra_keys entries": perBlock("extra_keys", []byte{0xc0}),
		"block_mm_infos":     perBlock("block_mm_infos", []byte{0xc0}),
	} {
		t.Run(name, func(t *testing.T) {
			payload = append(payload, 0xc0) // dp_rank
			d := wire.NewDecoder(wire.Limits{})
			var b wire.Batch
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			require.NoError(t, d.Decode(payload, &b))
			runtime.ReadMemStats(&after)
			switch name {
			case "events":
				require.Len(t, b.Events, events)
			case "raw hashes":
				require.Len(t, b.Events[0].RawHashes, keys)
			case "extra_keys", "mm_keys":
				require.Len(t, b.Events[0].ExtraKeys[0], keys)
			default:
				require.Len(t, b.Events[0].ExtraKeys, keys)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			require.Less(t, alloc, uint64(40*len(payload)), "allocated %d bytes for a %d-byte payload", alloc, len(payload))
		})
	}
}
