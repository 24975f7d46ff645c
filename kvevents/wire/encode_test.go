package wire_test

import (
	"encoding/hex"
	"testing"

	"github.com/shamaton/msgpack/v2"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// TestEncodeGoldenVectors proves byte identity with msgspec for every
// vector: current vLLM, legacy vLLM, the map-shaped batch and SGLang.
func TestEncodeGoldenVectors(t *testing.T) {
	for _, v := range wiretest.Vectors() {
		t.Run(v.Name, func(t *testing.T) {
			got := wire.AppendBatch(nil, v.Want(), v.Format)
			require.Equal(t, v.Hex, hex.EncodeToString(got))
		})
	}
}

// TestEncodeDecodedRoundTrip re-encodes what the decoder produced: the
// decoder keeps everything the encoder needs (raw bin hashes, signedness,
// nil versus present fields).
func TestEncodeDecodedRoundTrip(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	var b wire.Batch
	for _, v := range wiretest.Vectors() {
		t.Run(v.Name, func(t *testing.T) {
			payload := wiretest.MustHex(t, v.Hex)
			require.NoError(t, d.Decode(payload, &b))
			require.Equal(t, payload, wire.AppendBatch(nil, &b, v.Format))
		})
	}
}

// TestEncodeAppendsAndReuses checks that AppendBatch appends to dst and does
// not allocate when dst has room.
func TestEncodeAppendsAndReuses(t *testing.T) {
	b := wiretest.WantV5()
	buf := append(make([]byte, 0, 1024), 0xAA)
	out := wire.AppendBatch(buf, b, wire.FormatVLLM)
	require.Equal(t, byte(0xAA), out[0])
	allocs := testing.AllocsPerRun(100, func() {
		out = wire.AppendBatch(out[:0], b, wire.FormatVLLM)
	})
	require.Zero(t, allocs)
}

// TestEncodeReadableByShamaton decodes the encoder's output with the
// generic shamaton/msgpack decoder: an independent reader agrees on the
// structure and values.
func TestEncodeReadableByShamaton(t *testing.T) {
	var generic []any
	require.NoError(t, msgpack.Unmarshal(wire.AppendBatch(nil, wiretest.WantV7(), wire.FormatVLLM), &generic))
	require.Len(t, generic, 3)
	require.Equal(t, wiretest.TS, generic[0])
	events := generic[1].([]any)
	ev := events[0].(map[any]any)
	require.Equal(t, "BlockStored", ev["type"])
	require.Equal(t, "my-lora", ev["lora_name"])
	require.Nil(t, ev["parent_block_hash"])
	_, hasExtra := ev["extra_keys"]
	require.False(t, hasExtra, "None-default extra_keys omitted")

	generic = nil
	require.NoError(t, msgpack.Unmarshal(wire.AppendBatch(nil, wiretest.WantS1(), wire.FormatSGLang), &generic))
	events = generic[1].([]any)
	stored := events[0].([]any)
	require.Len(t, stored, 7)
	require.EqualValues(t, wiretest.SGLangHashA, stored[1].([]any)[0])
}

// TestDecodeShamatonEncoded decodes payloads built by shamaton/msgpack from
// generic values: key order differs from msgspec's (Go map iteration), int
// widths differ, and unknown keys appear. The decoder must not care.
func TestDecodeShamatonEncoded(t *testing.T) {
	payload, err := msgpack.Marshal([]any{
		1.5,
		[]any{
			map[string]any{
				"medium":            "CPU_PINNED",
				"type":              "BlockStored",
				"block_hashes":      []any{int64(-5), uint64(1 << 63), []byte{1, 2, 3}},
				"parent_block_hash": nil,
				"token_ids":         []any{uint16(70000 % 65536), uint32(150000), int8(3), 4, 5, 6},
				"block_size":        int64(2),
				"locality":          map[string]any{"zone": "a"},
				"extra_keys": []any{
					[]any{"my-lora", []any{"mm-hash", 4}},
					nil,
					[]any{[]byte{0xab, 0xcd}, 3.5},
				},
				"group_idx":          1,
				"kv_cache_spec_kind": "mla_attention",
				"event_version":      2,
			},
			[]any{"SomethingNew", 1, 2, 3},
			map[string]any{"type": "BlockRemoved", "block_hashes": []any{7}, "medium": nil},
		},
		nil,
	})
	require.NoError(t, err)
	var b wire.Batch
	require.NoError(t, wire.NewDecoder(wire.Limits{}).Decode(payload, &b))
	require.Len(t, b.Events, 2)
	require.Equal(t, 1, b.UnknownEvents)
	e := b.Events[0]
	require.Equal(t, wire.EventBlockStored, e.Type)
	require.Equal(t, []uint64{uint64(1<<64 - 5), 1 << 63, 0x010203}, e.BlockHashes)
	require.True(t, e.SignedHashes)
	require.Equal(t, [][]byte{nil, nil, {1, 2, 3}}, e.RawHashes)
	require.Equal(t, []uint32{70000 % 65536, 150000, 3, 4, 5, 6}, e.TokenIDs)
	require.Equal(t, 2, e.BlockSize)
	require.Equal(t, "CPU_PINNED", e.Medium)
	require.Equal(t, []wire.ExtraKey{{Kind: wire.ExtraKeyString, Value: "my-lora"}, {Kind: wire.ExtraKeyMM, Value: "mm-hash", Offset: 4}}, e.ExtraKeys[0])
	require.Empty(t, e.ExtraKeys[1])
	require.Equal(t, wire.ExtraKey{Kind: wire.ExtraKeyBytes, Value: "abcd"}, e.ExtraKeys[2][0])
	require.Equal(t, wire.ExtraKeyOpaque, e.ExtraKeys[2][1].Kind, "a float key is kept opaque")
	require.Equal(t, "mla_attention", e.Kind)
	require.Equal(t, 1, e.Group)
	require.Equal(t, wire.EventBlockRemoved, b.Events[1].Type)
	require.Equal(t, []uint64{7}, b.Events[1].BlockHashes)
	require.False(t, b.HasDPRank)

	// The opaque key survives a re-encode unchanged.
	var again wire.Batch
	require.NoError(t, wire.NewDecoder(wire.Limits{}).Decode(wire.AppendBatch(nil, &b, wire.FormatVLLM), &again))
	require.Equal(t, e.ExtraKeys[2], again.Events[0].ExtraKeys[2])
}
