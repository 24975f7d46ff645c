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
	for name, payload := range map[string][]byte{"extra_keys": extra, "mm_keys": mm} {
		t.Run(name, func(t *testing.T) {
			payload = append(payload, 0xc0) // dp_rank
			d := wire.NewDecoder(wire.Limits{})
			var b wire.Batch
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			require.NoError(t, d.Decode(payload, &b))
			runtime.ReadMemStats(&after)
			require.Len(t, b.Events, 1)
			require.Len(t, b.Events[0].ExtraKeys, 1)
			require.Len(t, b.Events[0].ExtraKeys[0], keys)
			alloc := after.TotalAlloc - before.TotalAlloc
			require.Less(t, alloc, uint64(40*len(payload)), "allocated %d bytes for a %d-byte payload", alloc, len(payload))
		})
	}
}
