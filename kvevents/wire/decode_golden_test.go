package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// canon returns a copy of e with empty slices as nil, so that a decoded
// event (whose slices are reused buffers) compares equal to a literal.
func canon(e wire.Event) wire.Event {
	if len(e.BlockHashes) == 0 {
		e.BlockHashes = nil
	}
	if len(e.RawHashes) == 0 {
		e.RawHashes = nil
	}
	if len(e.TokenIDs) == 0 {
		e.TokenIDs = nil
	}
	if len(e.ExtraKeys) == 0 {
		e.ExtraKeys = nil
	} else {
		keys := make([][]wire.ExtraKey, len(e.ExtraKeys))
		for i, k := range e.ExtraKeys {
			if len(k) > 0 {
				keys[i] = k
			}
		}
		e.ExtraKeys = keys
	}
	return e
}

func requireBatchEqual(t *testing.T, want, got *wire.Batch) {
	t.Helper()
	require.Equal(t, want.TS, got.TS, "ts")
	require.Equal(t, want.HasDPRank, got.HasDPRank, "dp rank set")
	require.Equal(t, want.DPRank, got.DPRank, "dp rank")
	require.Equal(t, want.HasPublisherID, got.HasPublisherID, "publisher identity set")
	require.Equal(t, want.PublisherID, got.PublisherID, "publisher identity")
	require.Len(t, got.Events, len(want.Events))
	for i := range want.Events {
		require.Equal(t, canon(want.Events[i]), canon(got.Events[i]), "event %d", i)
	}
}

func TestDecodeGoldenVectors(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	var b wire.Batch // reused across vectors, as a worker would
	for _, v := range wiretest.Vectors() {
		t.Run(v.Name, func(t *testing.T) {
			payload := wiretest.MustHex(t, v.Hex)
			require.Len(t, payload, v.Size, "spec size")
			require.NoError(t, d.Decode(payload, &b))
			requireBatchEqual(t, v.Want(), &b)
		})
	}
}

// TestDecodeGoldenFieldFacts spells out the facts of the golden payloads
// that matter most, one assertion each.
func TestDecodeGoldenFieldFacts(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	decode := func(name string) *wire.Batch {
		for _, v := range wiretest.Vectors() {
			if v.Name == name {
				var b wire.Batch
				require.NoError(t, d.Decode(wiretest.MustHex(t, v.Hex), &b))
				return &b
			}
		}
		t.Fatalf("no vector %s", name)
		return nil
	}

	v1 := decode("V1/current")
	e := v1.Events[0]
	require.Equal(t, wire.EventBlockStored, e.Type)
	require.Equal(t, uint64(9961711881680546425), e.BlockHashes[0], "H1 >= 2^63 decodes unsigned")
	require.False(t, e.HasParent, "parent nil")
	require.False(t, e.HasLoRAID, "lora_id nil")
	require.Equal(t, "", e.LoRAName)
	require.Len(t, e.ExtraKeys, 2, "extra_keys [nil, nil]")
	require.Empty(t, e.ExtraKeys[0])
	require.True(t, e.HasGroup)
	require.Equal(t, 0, e.Group)
	require.Equal(t, "full_attention", e.Kind)
	require.False(t, e.HasSlidingWindow, "sliding window omitted")
	require.Equal(t, "GPU", e.Medium)

	v1l := decode("V1/legacy").Events[0]
	require.False(t, v1l.HasSlidingWindow, "legacy trailing nil")
	require.Equal(t, "full_attention", v1l.Kind)

	v2 := decode("V2/current").Events[0]
	require.True(t, v2.HasParent)
	require.Equal(t, uint64(0xDEADBEEF), v2.ParentHash)

	v5 := decode("V5/legacy")
	require.True(t, v5.HasDPRank)
	require.Equal(t, int64(3), v5.DPRank)
	require.Equal(t, []wire.EventType{wire.EventBlockStored, wire.EventBlockRemoved, wire.EventAllBlocksCleared},
		[]wire.EventType{v5.Events[0].Type, v5.Events[1].Type, v5.Events[2].Type})

	require.False(t, decode("V6/current").HasDPRank, "dp None still 3 elements")

	v7 := decode("V7/current").Events[0]
	require.Equal(t, "my-lora", v7.LoRAName)
	require.True(t, v7.HasLoRAID)
	require.Equal(t, int64(7), v7.LoRAID)
	require.Empty(t, v7.ExtraKeys, "extra_keys omitted")
	require.False(t, v7.HasGroup, "group_idx omitted")

	v8 := decode("V8/current").Events[0]
	require.Equal(t, uint64(0x18191a1b1c1d1e1f), v8.BlockHashes[0], "bin → last 8 bytes big-endian")
	require.Len(t, v8.RawHashes[1], 32)
	require.Equal(t, wire.ExtraKey{Kind: wire.ExtraKeyString, Value: "salt-A"}, v8.ExtraKeys[0][0])

	s1 := decode("S1/sglang")
	require.Equal(t, uint64(wiretest.SGLangHashA), s1.Events[0].BlockHashes[0], "negative int64 keeps its bits")
	require.Equal(t, s1.Events[0].BlockHashes[0], s1.Events[1].ParentHash, "parent resolves to the block it names")
	require.Equal(t, s1.Events[1].BlockHashes[0], s1.Events[2].BlockHashes[0])

	s2 := decode("S2/sglang").Events[0]
	require.Equal(t, "salt-A", s2.CacheSalt)
	require.Equal(t, "", s2.LoRAName, "8th element is metadata, not lora_name")
}

// TestDecodeSteadyStateAllocationFree decodes every golden vector, over and
// over, into one reused Batch: after the first pass nothing is allocated.
func TestDecodeSteadyStateAllocationFree(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	var b wire.Batch
	var payloads [][]byte
	for _, v := range wiretest.Vectors() {
		payloads = append(payloads, wiretest.MustHex(t, v.Hex))
	}
	pass := func() {
		for _, p := range payloads {
			if err := d.Decode(p, &b); err != nil {
				t.Fatal(err)
			}
		}
	}
	pass()
	require.Zero(t, testing.AllocsPerRun(50, pass))
}
