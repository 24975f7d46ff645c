package kvevents

import (
	"encoding/hex"
	"testing"
)

// Golden KV-event payloads (frame 2), produced by the engines' own
// encoder (msgspec). ts = 1700000000.5, block size 4.
const (
	goldenH1 = uint64(0x8A3F1C2D4E5B6A79)
	goldenH2 = uint64(0x1122334455667788)
	goldenH0 = uint64(0xDEADBEEF)
	goldenTS = 1700000000.5
)

// SGLang chain hashes of pages [1,2,3,4] and [5,6,7,8]; variables so
// that converting them to uint64 keeps the two's-complement bits.
var (
	sglangHashA = int64(-3488128144981237669)
	sglangHashB = int64(5674439469042975057)
)

type goldenVector struct {
	name   string
	hex    string
	size   int    // byte size of the engine's payload
	format Format // layout the encoder must reproduce it with
	want   func() *Batch
}

func goldenVectors() []goldenVector {
	return []goldenVector{
		{"V1/current", "93cb41d954fc40200000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797392c0c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00", 202, FormatVLLM, wantV1},
		{"V1/legacy", "93cb41d954fc40200000919cab426c6f636b53746f72656492cf8a3f1c2d4e5b6a79cf1122334455667788c098010203040506070804c0a3475055c092c0c000ae66756c6c5f617474656e74696f6ec000", 81, FormatVLLMLegacy, wantV1},
		{"V2/current", "93cb41d954fc40200000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788b1706172656e745f626c6f636b5f68617368cedeadbeefa9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797392c0c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00", 206, FormatVLLM, wantV2},
		{"V2/legacy", "93cb41d954fc40200000919cab426c6f636b53746f72656492cf8a3f1c2d4e5b6a79cf1122334455667788cedeadbeef98010203040506070804c0a3475055c092c0c000ae66756c6c5f617474656e74696f6ec000", 85, FormatVLLMLegacy, wantV2},
		{"V3/current", "93cb41d954fc402000009184a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391cf8a3f1c2d4e5b6a79a66d656469756da3475055a967726f75705f6964780000", 76, FormatVLLM, wantV3},
		{"V3/legacy", "93cb41d954fc402000009194ac426c6f636b52656d6f76656491cf8a3f1c2d4e5b6a79a34750550000", 41, FormatVLLMLegacy, wantV3},
		{"V4/current", "93cb41d954fc402000009181a474797065b0416c6c426c6f636b73436c656172656400", 35, FormatVLLM, wantV4},
		{"V4/legacy", "93cb41d954fc402000009191b0416c6c426c6f636b73436c656172656400", 30, FormatVLLMLegacy, wantV4},
		{"V5/current", "93cb41d954fc40200000938ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788b1706172656e745f626c6f636b5f68617368cedeadbeefa9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797392c0c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e84a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391cf1122334455667788a66d656469756da3475055a967726f75705f6964780081a474797065b0416c6c426c6f636b73436c656172656403", 293, FormatVLLM, wantV5},
		{"V5/legacy", "93cb41d954fc40200000939cab426c6f636b53746f72656492cf8a3f1c2d4e5b6a79cf1122334455667788cedeadbeef98010203040506070804c0a3475055c092c0c000ae66756c6c5f617474656e74696f6ec094ac426c6f636b52656d6f76656491cf1122334455667788a34750550091b0416c6c426c6f636b73436c656172656403", 132, FormatVLLMLegacy, wantV5},
		{"V6/current", "93cb41d954fc40200000938ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788b1706172656e745f626c6f636b5f68617368cedeadbeefa9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797392c0c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e84a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391cf1122334455667788a66d656469756da3475055a967726f75705f6964780081a474797065b0416c6c426c6f636b73436c6561726564c0", 293, FormatVLLM, wantV6},
		{"V6/legacy", "93cb41d954fc40200000939cab426c6f636b53746f72656492cf8a3f1c2d4e5b6a79cf1122334455667788cedeadbeef98010203040506070804c0a3475055c092c0c000ae66756c6c5f617474656e74696f6ec094ac426c6f636b52656d6f76656491cf1122334455667788a34750550091b0416c6c426c6f636b73436c6561726564c0", 132, FormatVLLMLegacy, wantV6},
		{"V7/current", "93cb41d954fc402000009188a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391cf8a3f1c2d4e5b6a79b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739401020304aa626c6f636b5f73697a6504a76c6f72615f696407a66d656469756da3475055a96c6f72615f6e616d65a76d792d6c6f726100", 137, FormatVLLM, wantV7},
		{"V7/legacy", "93cb41d954fc40200000919cab426c6f636b53746f72656491cf8a3f1c2d4e5b6a79c094010203040407a3475055a76d792d6c6f7261c0c0c0c000", 59, FormatVLLMLegacy, wantV7},
		{"V8/current", "93cb41d954fc40200000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392c420000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fc420202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3fb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b6579739291a673616c742d41c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00", 259, FormatVLLM, wantV8},
		{"V8/legacy", "93cb41d954fc40200000919cab426c6f636b53746f72656492c420000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fc420202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3fc098010203040506070804c0a3475055c09291a673616c742d41c000ae66756c6c5f617474656e74696f6ec000", 138, FormatVLLMLegacy, wantV8},
		{"V9/dp0", "83a27473cb41d954fc40200000a66576656e74739181a474797065b0416c6c426c6f636b73436c6561726564b2646174615f706172616c6c656c5f72616e6b00", 64, FormatVLLMMapBatch, wantV4},
		{"V9/dpNone", "82a27473cb41d954fc40200000a66576656e74739181a474797065b0416c6c426c6f636b73436c6561726564", 44, FormatVLLMMapBatch, wantV9None},
		{"S1/sglang", "93cb41d954fc402000009497ab426c6f636b53746f72656491d3cf97adeedb59e05bc0940102030404c0a347505597ab426c6f636b53746f72656491cf4ebfa8a1f3c34151d3cf97adeedb59e05b940506070804c0a347505593ac426c6f636b52656d6f76656491cf4ebfa8a1f3c34151a347505591b0416c6c426c6f636b73436c656172656400", 136, FormatSGLang, wantS1},
		{"S2/sglang", "93cb41d954fc402000009198ab426c6f636b53746f72656491d3cf97adeedb59e05bc0940102030404c0a347505581aa63616368655f73616c74a673616c742d4100", 66, FormatSGLang, wantS2},
	}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex: %v", err)
	}
	return b
}

func tokensRange(from, to uint32) []uint32 {
	out := make([]uint32, 0, to-from+1)
	for t := from; t <= to; t++ {
		out = append(out, t)
	}
	return out
}

// storedV1 is the BlockStored of V1: two blocks, no parent, text-only,
// group 0, full attention.
func storedV1() Event {
	return Event{
		Type:        EventBlockStored,
		BlockHashes: []uint64{goldenH1, goldenH2},
		TokenIDs:    tokensRange(1, 8),
		BlockSize:   4,
		Medium:      "GPU",
		ExtraKeys:   [][]ExtraKey{nil, nil},
		Group:       0, HasGroup: true,
		Kind: "full_attention",
	}
}

func storedV2() Event {
	e := storedV1()
	e.ParentHash, e.HasParent = goldenH0, true
	return e
}

func removedH(h uint64) Event {
	return Event{Type: EventBlockRemoved, BlockHashes: []uint64{h}, Medium: "GPU", HasGroup: true}
}

func batchOf(dp int64, hasDP bool, evs ...Event) *Batch {
	return &Batch{TS: goldenTS, Events: evs, DPRank: dp, HasDPRank: hasDP}
}

func wantV1() *Batch { return batchOf(0, true, storedV1()) }
func wantV2() *Batch { return batchOf(0, true, storedV2()) }
func wantV3() *Batch { return batchOf(0, true, removedH(goldenH1)) }
func wantV4() *Batch { return batchOf(0, true, Event{Type: EventAllBlocksCleared}) }
func wantV5() *Batch {
	return batchOf(3, true, storedV2(), removedH(goldenH2), Event{Type: EventAllBlocksCleared})
}
func wantV6() *Batch {
	return batchOf(0, false, storedV2(), removedH(goldenH2), Event{Type: EventAllBlocksCleared})
}
func wantV7() *Batch {
	return batchOf(0, true, Event{
		Type:        EventBlockStored,
		BlockHashes: []uint64{goldenH1},
		TokenIDs:    tokensRange(1, 4),
		BlockSize:   4,
		LoRAID:      7, HasLoRAID: true,
		Medium:   "GPU",
		LoRAName: "my-lora",
	})
}
func wantV8() *Batch {
	d1, d2 := make([]byte, 32), make([]byte, 32)
	for i := range d1 {
		d1[i], d2[i] = byte(i), byte(32+i)
	}
	e := storedV1()
	// The last 8 bytes of each digest, big-endian: vLLM's int mode value.
	e.BlockHashes = []uint64{0x18191a1b1c1d1e1f, 0x38393a3b3c3d3e3f}
	e.RawHashes = [][]byte{d1, d2}
	e.ExtraKeys = [][]ExtraKey{{{Kind: ExtraKeyString, Value: "salt-A"}}, nil}
	return batchOf(0, true, e)
}
func wantV9None() *Batch { return batchOf(0, false, Event{Type: EventAllBlocksCleared}) }
func wantS1() *Batch {
	a, b := uint64(sglangHashA), uint64(sglangHashB)
	return batchOf(0, true,
		Event{Type: EventBlockStored, BlockHashes: []uint64{a}, TokenIDs: tokensRange(1, 4), BlockSize: 4,
			Medium: "GPU", SignedHashes: true},
		Event{Type: EventBlockStored, BlockHashes: []uint64{b}, ParentHash: a, HasParent: true,
			TokenIDs: tokensRange(5, 8), BlockSize: 4, Medium: "GPU", SignedHashes: true},
		Event{Type: EventBlockRemoved, BlockHashes: []uint64{b}, Medium: "GPU"},
		Event{Type: EventAllBlocksCleared},
	)
}
func wantS2() *Batch {
	return batchOf(0, true, Event{Type: EventBlockStored, BlockHashes: []uint64{uint64(sglangHashA)},
		TokenIDs: tokensRange(1, 4), BlockSize: 4, Medium: "GPU", SignedHashes: true, CacheSalt: "salt-A"})
}
