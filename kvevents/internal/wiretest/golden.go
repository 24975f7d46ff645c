package wiretest

import (
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// Golden KV-event payloads (frame 2), produced by the engines' own
// encoder (msgspec). ts = 1700000000.5, block size 4.
const (
	H1 = uint64(0x8A3F1C2D4E5B6A79)
	H2 = uint64(0x1122334455667788)
	H0 = uint64(0xDEADBEEF)
	TS = 1700000000.5
)

// SGLang chain hashes of pages [1,2,3,4] and [5,6,7,8]; variables so
// that converting them to uint64 keeps the two's-complement bits.
var (
	SGLangHashA = int64(-3488128144981237669)
	SGLangHashB = int64(5674439469042975057)
)

// Vector is one golden payload: its name ("V1/current"), its bytes in hex,
// their count, the layout the encoder reproduces it with, and the batch it
// decodes to.
type Vector struct {
	Name   string
	Hex    string
	Size   int         // byte size of the engine's payload
	Format wire.Format // layout the encoder must reproduce it with
	Want   func() *wire.Batch
}

// Vectors returns every golden payload: V1–V9 of vLLM, current (map
// events) and legacy (array events) layouts; V10 of vLLM's snapshot
// revision (vllm-project/vllm#57789: publisher_id after the rank, idle
// heartbeats, locality, ownership, session_id, medium STORAGE); T1–T2 of
// TensorRT-LLM's publisher (NVIDIA/TensorRT-LLM#16869 and #17023); and
// S1–S2 of SGLang's positional events and S3 of its map events
// (sgl-project/sglang#37482). V10, T1–T2 and S3 were built from the
// engines' struct declarations with msgspec's encoding rules (declaration
// order, tag first, None defaults omitted) by Debian's python3-msgpack,
// whose bytes for these types are msgspec's.
func Vectors() []Vector {
	return []Vector{
		{"V1/current", "93cb41d954fc40200000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797392c0c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00", 202, wire.FormatVLLM, WantV1},
		{"V1/legacy", "93cb41d954fc40200000919cab426c6f636b53746f72656492cf8a3f1c2d4e5b6a79cf1122334455667788c098010203040506070804c0a3475055c092c0c000ae66756c6c5f617474656e74696f6ec000", 81, wire.FormatVLLMLegacy, WantV1},
		{"V2/current", "93cb41d954fc40200000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788b1706172656e745f626c6f636b5f68617368cedeadbeefa9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797392c0c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00", 206, wire.FormatVLLM, WantV2},
		{"V2/legacy", "93cb41d954fc40200000919cab426c6f636b53746f72656492cf8a3f1c2d4e5b6a79cf1122334455667788cedeadbeef98010203040506070804c0a3475055c092c0c000ae66756c6c5f617474656e74696f6ec000", 85, wire.FormatVLLMLegacy, WantV2},
		{"V3/current", "93cb41d954fc402000009184a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391cf8a3f1c2d4e5b6a79a66d656469756da3475055a967726f75705f6964780000", 76, wire.FormatVLLM, WantV3},
		{"V3/legacy", "93cb41d954fc402000009194ac426c6f636b52656d6f76656491cf8a3f1c2d4e5b6a79a34750550000", 41, wire.FormatVLLMLegacy, WantV3},
		{"V4/current", "93cb41d954fc402000009181a474797065b0416c6c426c6f636b73436c656172656400", 35, wire.FormatVLLM, WantV4},
		{"V4/legacy", "93cb41d954fc402000009191b0416c6c426c6f636b73436c656172656400", 30, wire.FormatVLLMLegacy, WantV4},
		{"V5/current", "93cb41d954fc40200000938ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788b1706172656e745f626c6f636b5f68617368cedeadbeefa9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797392c0c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e84a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391cf1122334455667788a66d656469756da3475055a967726f75705f6964780081a474797065b0416c6c426c6f636b73436c656172656403", 293, wire.FormatVLLM, WantV5},
		{"V5/legacy", "93cb41d954fc40200000939cab426c6f636b53746f72656492cf8a3f1c2d4e5b6a79cf1122334455667788cedeadbeef98010203040506070804c0a3475055c092c0c000ae66756c6c5f617474656e74696f6ec094ac426c6f636b52656d6f76656491cf1122334455667788a34750550091b0416c6c426c6f636b73436c656172656403", 132, wire.FormatVLLMLegacy, WantV5},
		{"V6/current", "93cb41d954fc40200000938ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788b1706172656e745f626c6f636b5f68617368cedeadbeefa9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797392c0c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e84a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391cf1122334455667788a66d656469756da3475055a967726f75705f6964780081a474797065b0416c6c426c6f636b73436c6561726564c0", 293, wire.FormatVLLM, WantV6},
		{"V6/legacy", "93cb41d954fc40200000939cab426c6f636b53746f72656492cf8a3f1c2d4e5b6a79cf1122334455667788cedeadbeef98010203040506070804c0a3475055c092c0c000ae66756c6c5f617474656e74696f6ec094ac426c6f636b52656d6f76656491cf1122334455667788a34750550091b0416c6c426c6f636b73436c6561726564c0", 132, wire.FormatVLLMLegacy, WantV6},
		{"V7/current", "93cb41d954fc402000009188a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391cf8a3f1c2d4e5b6a79b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739401020304aa626c6f636b5f73697a6504a76c6f72615f696407a66d656469756da3475055a96c6f72615f6e616d65a76d792d6c6f726100", 137, wire.FormatVLLM, WantV7},
		{"V7/legacy", "93cb41d954fc40200000919cab426c6f636b53746f72656491cf8a3f1c2d4e5b6a79c094010203040407a3475055a76d792d6c6f7261c0c0c0c000", 59, wire.FormatVLLMLegacy, WantV7},
		{"V8/current", "93cb41d954fc40200000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392c420000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fc420202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3fb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b6579739291a673616c742d41c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00", 259, wire.FormatVLLM, WantV8},
		{"V8/legacy", "93cb41d954fc40200000919cab426c6f636b53746f72656492c420000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fc420202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3fc098010203040506070804c0a3475055c09291a673616c742d41c000ae66756c6c5f617474656e74696f6ec000", 138, wire.FormatVLLMLegacy, WantV8},
		{"V9/dp0", "83a27473cb41d954fc40200000a66576656e74739181a474797065b0416c6c426c6f636b73436c6561726564b2646174615f706172616c6c656c5f72616e6b00", 64, wire.FormatVLLMMapBatch, WantV4},
		{"V9/dpNone", "82a27473cb41d954fc40200000a66576656e74739181a474797065b0416c6c426c6f636b73436c6561726564", 44, wire.FormatVLLMMapBatch, WantV9None},
		{"S1/sglang", "93cb41d954fc402000009497ab426c6f636b53746f72656491d3cf97adeedb59e05bc0940102030404c0a347505597ab426c6f636b53746f72656491cf4ebfa8a1f3c34151d3cf97adeedb59e05b940506070804c0a347505593ac426c6f636b52656d6f76656491cf4ebfa8a1f3c34151a347505591b0416c6c426c6f636b73436c656172656400", 136, wire.FormatSGLang, WantS1},
		{"V10/heartbeat", "94cb41d954fc402000009000c410a0a1a2a3a4a5a6a7a8a9aaabacadaeaf", 30, wire.FormatVLLM, WantV10Heartbeat},
		{"V10/full", "94cb41d954fc40200000928ea474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788b1706172656e745f626c6f636b5f68617368cedeadbeefa9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da753544f52414745a96c6f72615f6e616d65c0aa65787472615f6b65797392c0c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6ea86c6f63616c697479a652454d4f5445a96f776e657273686970a76c6d6361636865aa73657373696f6e5f6964a6736573732d3186a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391cf8a3f1c2d4e5b6a79a66d656469756da3435055a967726f75705f69647800a86c6f63616c697479a54c4f43414ca96f776e657273686970a76c6d636163686502c410a0a1a2a3a4a5a6a7a8a9aaabacadaeaf", 377, wire.FormatVLLM, WantV10Full},
		{"T1/trtllm", "93cb41d954fc402000009388a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c083a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391cf1122334455667788a66d656469756da347505581a474797065b0416c6c426c6f636b73436c656172656400", 219, wire.FormatTRTLLM, WantT1},
		{"T2/trtllm-mm", "93cb41d954fc402000009189a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0a76d6d5f6b657973929183a474797065a66d6d5f6b6579a468617368b039663836643038313838346337643635ac73746172745f6f6666736574029001", 203, wire.FormatTRTLLM, WantT2},
		{"S2/sglang", "93cb41d954fc402000009198ab426c6f636b53746f72656491d3cf97adeedb59e05bc0940102030404c0a347505581aa63616368655f73616c74a673616c742d4100", 66, wire.FormatSGLang, WantS2},
		{"S3/sglang-map", S3Hex, 346, wire.FormatSGLangMap, WantS3},
	}
}

// MustHex decodes s, failing t on bad hex.
func MustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex: %v", err)
	}
	return b
}

// TokensRange returns the token IDs from, from+1, …, to.
func TokensRange(from, to uint32) []uint32 {
	out := make([]uint32, 0, to-from+1)
	for t := from; t <= to; t++ {
		out = append(out, t)
	}
	return out
}

// StoredV1 is the BlockStored of V1: two blocks, no parent, text-only,
// group 0, full attention.
func StoredV1() wire.Event {
	return wire.Event{
		Type:        wire.EventBlockStored,
		BlockHashes: []uint64{H1, H2},
		TokenIDs:    TokensRange(1, 8),
		BlockSize:   4,
		Medium:      "GPU",
		ExtraKeys:   [][]wire.ExtraKey{nil, nil},
		Group:       0, HasGroup: true,
		Kind: "full_attention",
	}
}

// StoredV2 is StoredV1 with parent H0.
func StoredV2() wire.Event {
	e := StoredV1()
	e.ParentHash, e.HasParent = H0, true
	return e
}

// RemovedH is a BlockRemoved of the one hash h (GPU, group 0).
func RemovedH(h uint64) wire.Event {
	return wire.Event{Type: wire.EventBlockRemoved, BlockHashes: []uint64{h}, Medium: "GPU", HasGroup: true}
}

// BatchOf is a batch at TS holding evs, with data-parallel rank dp when
// hasDP.
func BatchOf(dp int64, hasDP bool, evs ...wire.Event) *wire.Batch {
	return &wire.Batch{TS: TS, Events: evs, DPRank: dp, HasDPRank: hasDP}
}

// WantV1 is the batch golden vector V1 decodes to.
func WantV1() *wire.Batch { return BatchOf(0, true, StoredV1()) }

// WantV2 is the batch golden vector V2 decodes to.
func WantV2() *wire.Batch { return BatchOf(0, true, StoredV2()) }

// WantV3 is the batch golden vector V3 decodes to.
func WantV3() *wire.Batch { return BatchOf(0, true, RemovedH(H1)) }

// WantV4 is the batch golden vector V4 decodes to.
func WantV4() *wire.Batch { return BatchOf(0, true, wire.Event{Type: wire.EventAllBlocksCleared}) }

// WantV5 is the batch golden vector V5 decodes to.
func WantV5() *wire.Batch {
	return BatchOf(3, true, StoredV2(), RemovedH(H2), wire.Event{Type: wire.EventAllBlocksCleared})
}

// WantV6 is the batch golden vector V6 decodes to.
func WantV6() *wire.Batch {
	return BatchOf(0, false, StoredV2(), RemovedH(H2), wire.Event{Type: wire.EventAllBlocksCleared})
}

// WantV7 is the batch golden vector V7 decodes to.
func WantV7() *wire.Batch {
	return BatchOf(0, true, wire.Event{
		Type:        wire.EventBlockStored,
		BlockHashes: []uint64{H1},
		TokenIDs:    TokensRange(1, 4),
		BlockSize:   4,
		LoRAID:      7, HasLoRAID: true,
		Medium:   "GPU",
		LoRAName: "my-lora",
	})
}

// WantV8 is the batch golden vector V8 decodes to.
func WantV8() *wire.Batch {
	d1, d2 := make([]byte, 32), make([]byte, 32)
	for i := range d1 {
		d1[i], d2[i] = byte(i), byte(32+i)
	}
	e := StoredV1()
	// The last 8 bytes of each digest, big-endian: vLLM's int mode value.
	e.BlockHashes = []uint64{0x18191a1b1c1d1e1f, 0x38393a3b3c3d3e3f}
	e.RawHashes = [][]byte{d1, d2}
	e.ExtraKeys = [][]wire.ExtraKey{{{Kind: wire.ExtraKeyString, Value: "salt-A"}}, nil}
	return BatchOf(0, true, e)
}

// WantV9None is the batch of V9 without a rank (V9/dpNone).
func WantV9None() *wire.Batch { return BatchOf(0, false, wire.Event{Type: wire.EventAllBlocksCleared}) }

// WantS1 is the batch golden vector S1 decodes to.
func WantS1() *wire.Batch {
	a, b := uint64(SGLangHashA), uint64(SGLangHashB)
	return BatchOf(0, true,
		wire.Event{Type: wire.EventBlockStored, BlockHashes: []uint64{a}, TokenIDs: TokensRange(1, 4), BlockSize: 4,
			Medium: "GPU", SignedHashes: true},
		wire.Event{Type: wire.EventBlockStored, BlockHashes: []uint64{b}, ParentHash: a, HasParent: true,
			TokenIDs: TokensRange(5, 8), BlockSize: 4, Medium: "GPU", SignedHashes: true},
		wire.Event{Type: wire.EventBlockRemoved, BlockHashes: []uint64{b}, Medium: "GPU"},
		wire.Event{Type: wire.EventAllBlocksCleared},
	)
}

// WantS2 is the batch golden vector S2 decodes to.
func WantS2() *wire.Batch {
	return BatchOf(0, true, wire.Event{Type: wire.EventBlockStored, BlockHashes: []uint64{uint64(SGLangHashA)},
		TokenIDs: TokensRange(1, 4), BlockSize: 4, Medium: "GPU", SignedHashes: true, CacheSalt: "salt-A"})
}

// S3Hex is SGLang's payload since sgl-project/sglang#37482, which made its
// events msgspec tagged maps (omit_defaults) with cache_salt and session_id
// fields of BlockStored itself; the batch stays [ts, events, attn_dp_rank].
// It holds S1's events, the first store salted ("salt-A") for session
// "sess-1". Built from SGLang's struct declarations with msgspec's rules by
// Debian's python3-msgpack (TestSGLangMapPayloadMatchesPythonMsgpack).
const S3Hex = "93cb41d954fc402000009489a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391d3cf97adeedb59e05bb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739401020304aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055aa63616368655f73616c74a673616c742d41aa73657373696f6e5f6964a6736573732d3187a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391cf4ebfa8a1f3c34151b1706172656e745f626c6f636b5f68617368d3cf97adeedb59e05ba9746f6b656e5f6964739405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da347505583a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391cf4ebfa8a1f3c34151a66d656469756da347505581a474797065b0416c6c426c6f636b73436c656172656400"

// WantS3 is the batch S3Hex decodes to: S1's, with the salt and session of
// the first store.
func WantS3() *wire.Batch {
	b := WantS1()
	b.Events[0].CacheSalt, b.Events[0].SessionID = "salt-A", "sess-1"
	return b
}

// S4Hex is SGLang's payload in its vLLM-aligned positional layout: S1's
// events with both stores salted ("salt-A"), as its event recorder writes
// every page of a salted radix node. A salted BlockStored has 15 elements
// (vLLM's 12 with lora_name nil and extra_keys holding the one mirror key
// "dynamo-cache-salt:salt-A", then nil locality and ownership, then the
// metadata map), BlockRemoved 8 and AllBlocksCleared 2. Built from SGLang's
// struct declarations with msgspec's array_like rules by Debian's
// python3-msgpack (TestSGLangAlignedPayloadMatchesPythonMsgpack). It is
// not in Vectors: no encoder format writes this layout.
const S4Hex = "93cb41d954fc40200000949fab426c6f636b53746f72656491d3cf97adeedb59e05bc0940102030404c0a3475055c09191b864796e616d6f2d63616368652d73616c743a73616c742d41c0c0c0c0c081aa63616368655f73616c74a673616c742d419fab426c6f636b53746f72656491cf4ebfa8a1f3c34151d3cf97adeedb59e05b940506070804c0a3475055c09191b864796e616d6f2d63616368652d73616c743a73616c742d41c0c0c0c0c081aa63616368655f73616c74a673616c742d4198ac426c6f636b52656d6f76656491cf4ebfa8a1f3c34151a3475055c0c0c0c0c092b0416c6c426c6f636b73436c6561726564c000"

// WantS4 is the batch S4Hex decodes to: S1's, both stores with the salt
// and one (emptied) extra-keys entry, the mirror key being the salt.
func WantS4() *wire.Batch {
	b := WantS1()
	for i := range 2 {
		b.Events[i].CacheSalt = "salt-A"
		b.Events[i].ExtraKeys = [][]wire.ExtraKey{{}}
	}
	return b
}

// PublisherID is the identity in the V10 vectors.
var PublisherID = [16]byte{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf}

// WantV10Heartbeat is the idle heartbeat of vLLM's snapshot revision: no
// events, rank 0, the publisher's identity.
func WantV10Heartbeat() *wire.Batch {
	b := BatchOf(0, true)
	b.PublisherID, b.HasPublisherID = PublisherID, true
	return b
}

// WantV10Full is the V10 batch with every new field: a store to the
// STORAGE medium from a remote, secondary tier for session "sess-1", and a
// removal from a local one, at rank 2.
func WantV10Full() *wire.Batch {
	st := StoredV2()
	st.Medium, st.Locality, st.Ownership, st.SessionID = "STORAGE", "REMOTE", "lmcache", "sess-1"
	rm := RemovedH(H1)
	rm.Medium, rm.Locality, rm.Ownership = "CPU", "LOCAL", "lmcache"
	b := BatchOf(2, true, st, rm)
	b.PublisherID, b.HasPublisherID = PublisherID, true
	return b
}

// WantT1 is TensorRT-LLM's batch: a store (no extra keys, group or kind),
// a removal and a clear.
func WantT1() *wire.Batch {
	st := StoredV1()
	st.ExtraKeys, st.Group, st.HasGroup, st.Kind = nil, 0, false, ""
	rm := RemovedH(H2)
	rm.HasGroup = false
	return BatchOf(0, true, st, rm, wire.Event{Type: wire.EventAllBlocksCleared})
}

// WantT2 is TensorRT-LLM's store with mm_keys: one image segment starting
// at token 2 of block 0, decoded as a multimodal extra key, and an empty
// list for block 1 (its BlockStored declares mm_keys as a list of lists,
// and kv_cache_events.py gives a block without a segment an empty one).
func WantT2() *wire.Batch {
	st := StoredV1()
	st.Group, st.HasGroup, st.Kind = 0, false, ""
	st.ExtraKeys = [][]wire.ExtraKey{{{Kind: wire.ExtraKeyMM, Value: "9f86d081884c7d65", Offset: 2}}, nil}
	return BatchOf(1, true, st)
}

// StoredBatch builds a current-format (map event) BlockStored batch of
// blocks × blockSize tokens with realistic values: 64-bit int hashes (cf),
// token IDs spread over a 150k vocabulary (mostly 5-byte ce ints).
func StoredBatch(rng *rand.Rand, blocks, blockSize int, parent uint64, hasParent bool) *wire.Batch {
	e := wire.Event{
		Type:       wire.EventBlockStored,
		ParentHash: parent, HasParent: hasParent,
		BlockSize: blockSize,
		Medium:    "GPU",
		ExtraKeys: make([][]wire.ExtraKey, blocks),
		Group:     0, HasGroup: true,
		Kind: "full_attention",
	}
	for i := 0; i < blocks; i++ {
		e.BlockHashes = append(e.BlockHashes, rng.Uint64()|1<<63)
	}
	for i := 0; i < blocks*blockSize; i++ {
		e.TokenIDs = append(e.TokenIDs, uint32(rng.IntN(150000)))
	}
	return &wire.Batch{TS: TS, Events: []wire.Event{e}, HasDPRank: true}
}
