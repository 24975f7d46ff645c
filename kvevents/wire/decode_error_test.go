package wire_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvevents/internal/wiretest"
	"github.com/kvroute/kvroute/kvevents/wire"
)

func decodeErr(t *testing.T, d *wire.Decoder, payload []byte) *wire.DecodeError {
	t.Helper()
	var b wire.Batch
	b.Events = append(b.Events, wire.Event{Type: wire.EventBlockStored}) // stale content must vanish
	err := d.Decode(payload, &b)
	require.Error(t, err)
	var de *wire.DecodeError
	require.True(t, errors.As(err, &de), "error is a *DecodeError: %v", err)
	require.Empty(t, b.Events, "nothing from a rejected payload may be applied")
	require.NotEmpty(t, de.Error())
	return de
}

// TestDecodeTruncatedEveryPrefix cuts every golden vector at every length:
// each strict prefix is rejected with ErrTruncated (or ErrMalformed when
// the cut leaves a shorter but well-formed value followed by nothing).
func TestDecodeTruncatedEveryPrefix(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	for _, v := range wiretest.Vectors() {
		payload := wiretest.MustHex(t, v.Hex)
		for n := 0; n < len(payload); n++ {
			de := decodeErr(t, d, payload[:n])
			require.True(t, errors.Is(de, wire.ErrTruncated) || errors.Is(de, wire.ErrMalformed),
				"%s cut at %d: %v", v.Name, n, de)
		}
	}
	// A cut inside the token list is a truncation, reported there.
	payload := wiretest.MustHex(t, wiretest.Vectors()[0].Hex)
	de := decodeErr(t, d, payload[:100])
	require.ErrorIs(t, de, wire.ErrTruncated)
	require.Equal(t, "truncated", de.Reason())
}

func TestDecodeTrailingBytes(t *testing.T) {
	payload := append(wiretest.MustHex(t, wiretest.Vectors()[0].Hex), 0xc0)
	de := decodeErr(t, wire.NewDecoder(wire.Limits{}), payload)
	require.ErrorIs(t, de, wire.ErrMalformed)
	require.Equal(t, "malformed", de.Reason())
}

func TestDecodeTypeConfused(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	ts := []byte{0xcb, 0x41, 0xd9, 0x54, 0xfc, 0x40, 0x20, 0, 0}
	batch := func(events ...byte) []byte {
		p := append([]byte{0x93}, ts...)
		return append(append(p, events...), 0x00)
	}
	cases := map[string][]byte{
		"batch is an int":            {0x05},
		"batch is a string":          {0xa1, 'x'},
		"batch array of one":         append([]byte{0x91}, ts...),
		"events is a map":            append(append([]byte{0x93}, ts...), 0x80, 0x00),
		"ts is a string":             {0x93, 0xa1, 'x', 0x90, 0x00},
		"event is an int":            batch(0x91, 0x07),
		"event is an empty array":    batch(0x91, 0x90),
		"tag is an int":              batch(0x91, 0x91, 0x07),
		"hashes is a string":         batch(0x91, 0x92, 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd', 0xa1, 'x'),
		"hash is a string":           batch(0x91, 0x92, 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd', 0x91, 0xa1, 'x'),
		"block_size is a string":     batch(0x91, 0x95, 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd', 0x90, 0xc0, 0x90, 0xa1, 'x'),
		"block_size overflows int32": batch(0x91, 0x95, 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd', 0x90, 0xc0, 0x90, 0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0),
		"medium is an int":           batch(0x91, 0x93, 0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd', 0x90, 0x05),
		"never-used byte 0xc1":       batch(0x91, 0x92, 0xa1, 'x', 0xc1),
		"map batch without events":   {0x81, 0xa2, 't', 's', 0x00},
		"dp rank is a string":        {0x93, 0x00, 0x90, 0xa1, 'x'},
	}
	for name, payload := range cases {
		t.Run(name, func(t *testing.T) {
			de := decodeErr(t, d, payload)
			require.ErrorIs(t, de, wire.ErrMalformed, "%v", de)
		})
	}
}

// TestDecodeClaimedLengthsNotTrusted: headers claiming huge containers are
// rejected before anything is allocated for them.
func TestDecodeClaimedLengthsNotTrusted(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	huge := []byte{0xdd, 0x7f, 0xff, 0xff, 0xff} // array32 of 2^31-1
	cases := map[string][]byte{
		"events array32":  append([]byte{0x93, 0x00}, huge...),
		"batch array32":   huge,
		"map batch map32": {0xdf, 0x7f, 0xff, 0xff, 0xff},
		"str32 tag":       {0x93, 0x00, 0x91, 0x91, 0xdb, 0x7f, 0xff, 0xff, 0xff},
		"bin32 hash":      {0x93, 0x00, 0x91, 0x92, 0xa1, 'x', 0x91, 0xc6, 0x7f, 0xff, 0xff, 0xff},
	}
	for name, payload := range cases {
		t.Run(name, func(t *testing.T) {
			var b wire.Batch
			var err error
			allocs := testing.AllocsPerRun(10, func() { err = d.Decode(payload, &b) })
			require.ErrorIs(t, err, wire.ErrTruncated)
			require.LessOrEqual(t, allocs, 1.0, "only the error itself may be allocated")
		})
	}
}

// TestDecodeClaimedLengthsFrom2to31: a 32-bit length of 2^31 or more is
// a truncation like any other length beyond the payload, on every
// platform (where int has 32 bits it must not wrap negative), in every
// header form the decoder reads or skips; the batch is rejected and
// PeekHeader, which walks the events of the identity layout, fails too.
func TestDecodeClaimedLengthsFrom2to31(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	for _, n := range [][4]byte{{0x80, 0, 0, 0}, {0xff, 0xff, 0xff, 0xff}} {
		hdr := func(c byte) []byte { return []byte{c, n[0], n[1], n[2], n[3]} }
		// unknown is a positional event of an unknown tag, whose fields are skipped.
		unknown := func(v []byte) []byte { return append([]byte{0x91, 0x92, 0xa1, 'X'}, v...) }
		cases := map[string][]byte{
			"batch array32":   hdr(0xdd),
			"map batch map32": hdr(0xdf),
			"events array32":  append([]byte{0x93, 0x00}, hdr(0xdd)...),
			"str32 tag":       append([]byte{0x93, 0x00, 0x91, 0x91}, hdr(0xdb)...),
			"bin32 hash":      append([]byte{0x93, 0x00, 0x91, 0x92, 0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd', 0x91}, hdr(0xc6)...),
			"skipped str32":   append([]byte{0x93, 0x00}, unknown(hdr(0xdb))...),
			"skipped bin32":   append([]byte{0x93, 0x00}, unknown(hdr(0xc6))...),
			"skipped ext32":   append([]byte{0x93, 0x00}, unknown(hdr(0xc9))...),
			"skipped array32": append([]byte{0x93, 0x00}, unknown(hdr(0xdd))...),
			"skipped map32":   append([]byte{0x93, 0x00}, unknown(hdr(0xdf))...),
		}
		for name, payload := range cases {
			t.Run(fmt.Sprintf("%s %x", name, n), func(t *testing.T) {
				payload = append(payload, 0xc0, 0xc0, 0xc0) // a few bytes follow the header
				de := decodeErr(t, d, payload)
				require.ErrorIs(t, de, wire.ErrTruncated)
				require.GreaterOrEqual(t, de.Offset, 0)
				require.LessOrEqual(t, de.Offset, len(payload))
				id := append([]byte{0x94, 0x00}, payload[2:]...) // the identity layout: PeekHeader skips the events
				if payload[0] == 0x93 {
					_, err := wire.PeekHeader(id)
					require.ErrorIs(t, err, wire.ErrTruncated)
				}
			})
		}
	}
}

func TestDecodeLimits(t *testing.T) {
	v1 := wiretest.MustHex(t, wiretest.Vectors()[0].Hex) // 2 hashes, 8 tokens, 202 bytes
	v5 := wiretest.MustHex(t, wiretest.Vectors()[8].Hex) // 3 events
	cases := []struct {
		name    string
		limits  wire.Limits
		payload []byte
		limit   string
	}{
		{"payload", wire.Limits{MaxPayloadBytes: 201}, v1, "payload_bytes"},
		{"tokens", wire.Limits{MaxTokensPerEvent: 7}, v1, "tokens_per_event"},
		{"hashes", wire.Limits{MaxHashesPerEvent: 1}, v1, "hashes_per_event"},
		{"events", wire.Limits{MaxEventsPerBatch: 2}, v5, "events_per_batch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			de := decodeErr(t, wire.NewDecoder(c.limits), c.payload)
			require.ErrorIs(t, de, wire.ErrLimit)
			require.Equal(t, c.limit, de.Limit)
			require.Equal(t, "limit", de.Reason())
			require.Greater(t, de.Value, de.Max)
		})
		t.Run(c.name+"/at the limit", func(t *testing.T) {
			l := c.limits
			switch c.limit {
			case "payload_bytes":
				l.MaxPayloadBytes++
			case "tokens_per_event":
				l.MaxTokensPerEvent++
			case "hashes_per_event":
				l.MaxHashesPerEvent++
			case "events_per_batch":
				l.MaxEventsPerBatch++
			}
			var b wire.Batch
			require.NoError(t, wire.NewDecoder(l).Decode(c.payload, &b))
		})
	}
	require.Equal(t, wire.DefaultLimits(), wire.DecoderLimits(wire.NewDecoder(wire.Limits{MaxTokensPerEvent: -1})))
}

// TestDecodeLenientForms covers what the decoder accepts beyond the golden
// vectors: 2-element batches (v0.9), short legacy events, extra trailing
// elements, wide headers, invalid tokens and unknown tags.
func TestDecodeLenientForms(t *testing.T) {
	d := wire.NewDecoder(wire.Limits{})
	var b wire.Batch

	// v0.9: [ts, events] with a 6-element BlockStored and 2-element BlockRemoved.
	v09 := []byte{0x92, 0xcb, 0x41, 0xd9, 0x54, 0xfc, 0x40, 0x20, 0, 0, 0x92,
		0x96, 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd', 0x91, 0xff, 0xc0, 0x92, 0x01, 0x02, 0x02, 0xc0,
		0x92, 0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd', 0x91, 0xd0, 0x80}
	require.NoError(t, d.Decode(v09, &b))
	require.False(t, b.HasDPRank)
	require.Equal(t, uint64(1<<64-1), b.Events[0].BlockHashes[0], "negative fixint -1")
	require.Equal(t, []uint32{1, 2}, b.Events[0].TokenIDs)
	require.Equal(t, "", b.Events[0].Medium)
	require.Equal(t, uint64(1<<64-128), b.Events[1].BlockHashes[0])

	// Wide headers (array16/map16/str8) and extra trailing elements.
	wide := []byte{0xdc, 0x00, 0x04, 0x00, 0xdc, 0x00, 0x01,
		0xde, 0x00, 0x02, 0xd9, 0x04, 't', 'y', 'p', 'e', 0xb0, 'A', 'l', 'l', 'B', 'l', 'o', 'c', 'k', 's', 'C', 'l', 'e', 'a', 'r', 'e', 'd',
		0xa5, 'e', 'x', 't', 'r', 'a', 0x92, 0x01, 0x02,
		0x01, 0xa4, 'm', 'o', 'r', 'e'}
	require.NoError(t, d.Decode(wide, &b))
	require.Equal(t, wire.EventAllBlocksCleared, b.Events[0].Type)
	require.Equal(t, int64(1), b.DPRank)

	// Token list holding a bigram pair and a negative value: flagged, not fatal.
	bad := []byte{0x93, 0x00, 0x92,
		0x94, 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd', 0x91, 0x01, 0xc0, 0x94, 0x05, 0x92, 0x01, 0x02, 0xff, 0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0,
		0x91, 0xb0, 'A', 'l', 'l', 'B', 'l', 'o', 'c', 'k', 's', 'C', 'l', 'e', 'a', 'r', 'e', 'd',
		0x00}
	require.NoError(t, d.Decode(bad, &b))
	require.True(t, b.Events[0].InvalidTokens)
	require.Equal(t, 1, b.Events[0].InvalidTokenAt, "the first non-token is the pair after 5")
	require.Equal(t, []uint32{5}, b.Events[0].TokenIDs)
	require.Equal(t, wire.EventAllBlocksCleared, b.Events[1].Type)

	// Map event without "type", and an unknown tag: both kept as unknown.
	unknown := []byte{0x93, 0x00, 0x92, 0x81, 0xa6, 'm', 'e', 'd', 'i', 'u', 'm', 0xa3, 'G', 'P', 'U',
		0x92, 0xa3, 'N', 'e', 'w', 0x81, 0x01, 0x02, 0x00}
	require.NoError(t, d.Decode(unknown, &b))
	require.Empty(t, b.Events)
	require.Equal(t, 2, b.UnknownEvents)
}

func TestDecodeEmptyBinHashIsZero(t *testing.T) {
	payload := []byte{0x93, 0x00, 0x91, 0x93, 0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd',
		0x92, 0xc4, 0x00, 0xc4, 0x03, 0x01, 0x02, 0x03, 0xc0, 0x00}
	var b wire.Batch
	require.NoError(t, wire.NewDecoder(wire.Limits{}).Decode(payload, &b))
	require.Equal(t, []uint64{0, 0x010203}, b.Events[0].BlockHashes)
	require.Equal(t, [][]byte{{}, {1, 2, 3}}, b.Events[0].RawHashes)
	var again wire.Batch
	require.NoError(t, wire.NewDecoder(wire.Limits{}).Decode(wire.AppendBatch(nil, &b, wire.FormatVLLMLegacy), &again))
	require.Equal(t, [][]byte{{}, {1, 2, 3}}, again.Events[0].RawHashes, "empty bin re-encoded as an empty bin")
}
