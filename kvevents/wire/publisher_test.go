package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
)

func vector(t *testing.T, name string) []byte {
	t.Helper()
	for _, v := range wiretest.Vectors() {
		if v.Name == name {
			return wiretest.MustHex(t, v.Hex)
		}
	}
	t.Fatalf("no vector %s", name)
	return nil
}

// TestPublisherIdentityFacts spells out what vLLM's snapshot revision adds
// to a batch, one assertion each.
func TestPublisherIdentityFacts(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	var b wire.Batch

	require.NoError(t, d.Decode(vector(t, "V10/heartbeat"), &b))
	require.True(t, b.IsHeartbeat(), "an idle publisher's batch has no events")
	require.True(t, b.HasPublisherID)
	require.Equal(t, wiretest.PublisherID, b.PublisherID, "16 bytes after the rank")

	require.NoError(t, d.Decode(vector(t, "V10/full"), &b))
	require.False(t, b.IsHeartbeat())
	require.Equal(t, int64(2), b.DPRank)
	st, rm := b.Events[0], b.Events[1]
	require.Equal(t, "STORAGE", st.Medium)
	require.Equal(t, "REMOTE", st.Locality)
	require.Equal(t, "lmcache", st.Ownership)
	require.Equal(t, "sess-1", st.SessionID)
	require.Equal(t, "LOCAL", rm.Locality)
	require.Equal(t, "lmcache", rm.Ownership)

	require.NoError(t, d.Decode(vector(t, "V1/current"), &b))
	require.False(t, b.HasPublisherID, "older layouts have no identity")
	require.Equal(t, [16]byte{}, b.PublisherID, "and leave it zero after a batch that had one")

	require.NoError(t, d.Decode(vector(t, "T2/trtllm-mm"), &b))
	require.Equal(t, []wire.ExtraKey{{Kind: wire.ExtraKeyMM, Value: "9f86d081884c7d65", Offset: 2}}, b.Events[0].ExtraKeys[0],
		"TensorRT-LLM's mm_keys become the block's multimodal key")
}

// TestPeekHeader reads identities and event counts without decoding, for
// every golden vector, and agrees with Decode.
func TestPeekHeader(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	var b wire.Batch
	for _, v := range wiretest.Vectors() {
		payload := wiretest.MustHex(t, v.Hex)
		h, err := wire.PeekHeader(payload)
		require.NoError(t, err, v.Name)
		require.NoError(t, d.Decode(payload, &b), v.Name)
		require.Equal(t, len(b.Events)+b.UnknownEvents, h.Events, v.Name)
		require.Equal(t, b.HasPublisherID, h.HasPublisherID, v.Name)
		require.Equal(t, b.PublisherID, h.PublisherID, v.Name)
	}
	for _, bad := range [][]byte{{}, {0x91, 0x00}, {0xc3}, {0x94, 0xcb}} {
		_, err := wire.PeekHeader(bad)
		require.Error(t, err, "%x", bad)
	}
	// The map-shaped batch carries the identity under its name.
	in := wiretest.WantV10Heartbeat()
	h, err := wire.PeekHeader(wire.AppendBatch(nil, in, wire.FormatVLLMMapBatch))
	require.NoError(t, err)
	require.Equal(t, wire.Header{PublisherID: wiretest.PublisherID, HasPublisherID: true}, h)
}

// TestPublisherIdentityLenient: a fourth batch element that is not a
// 16-byte bin is another engine's field, not an identity; the batch still
// decodes, without one. The new string fields in another form are skipped.
func TestPublisherIdentityLenient(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	var b wire.Batch
	for _, tail := range [][]byte{
		{0xc4, 0x03, 1, 2, 3}, // a bin of another length
		{0xa2, 'i', 'd'},      // a string
		{0xc0},                // nil
		{0x07},                // an int
	} {
		payload := append([]byte{0x94, 0x00, 0x90, 0x00}, tail...)
		require.NoError(t, d.Decode(payload, &b), "%x", tail)
		require.False(t, b.HasPublisherID, "%x", tail)
		h, err := wire.PeekHeader(payload)
		require.NoError(t, err)
		require.False(t, h.HasPublisherID)
	}
	ev := []byte{0x93, 0x00, 0x91, 0x83, 0xa4, 't', 'y', 'p', 'e', 0xb0, 'A', 'l', 'l', 'B', 'l', 'o', 'c', 'k', 's', 'C', 'l', 'e', 'a', 'r', 'e', 'd',
		0xa8, 'l', 'o', 'c', 'a', 'l', 'i', 't', 'y', 0x81, 0x01, 0x02,
		0xaa, 's', 'e', 's', 's', 'i', 'o', 'n', '_', 'i', 'd', 0x05, 0xc0}
	require.NoError(t, d.Decode(ev, &b))
	require.Equal(t, "", b.Events[0].Locality)
	require.Equal(t, "", b.Events[0].SessionID)
}
