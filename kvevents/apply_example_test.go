package kvevents_test

import (
	"encoding/hex"
	"fmt"

	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// Example_decodeAndApply decodes a current-format vLLM BlockStored payload (as
// vLLM's msgspec encoder writes it: two blocks of 4 tokens, [1,2,3,4] and
// [5,6,7,8]), applies it for one
// endpoint, and matches a request for the same tokens against the index.
func Example_decodeAndApply() {
	payload, err := hex.DecodeString("93cb41d954fc40200000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf8a3f1c2d4e5b6a79cf1122334455667788b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797392c0c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00")
	if err != nil {
		panic(err)
	}
	endpoint, model := "10.0.0.1:8000", "my-model" // from the topic kv@10.0.0.1:8000@my-model

	ix, err := kvindex.New(kvindex.Config{BlockSize: 4, SweepInterval: -1}, kvindex.Options{})
	if err != nil {
		panic(err)
	}
	defer ix.Close()
	applier, err := kvevents.NewApplier(kvevents.ApplierConfig{}, ix, kvevents.Options{})
	if err != nil {
		panic(err)
	}

	dec := wire.NewDecoder(wire.Limits{})
	var batch wire.Batch // reuse across messages: decoding then allocates nothing
	if err := dec.Decode(payload, &batch); err != nil {
		fmt.Println("rejected:", err)
		return
	}
	ev := batch.Events[0]
	fmt.Printf("%s: %d blocks, hash %#x, medium %s, group %d (%s)\n",
		ev.Type, len(ev.BlockHashes), ev.BlockHashes[0], ev.Medium, ev.Group, ev.Kind)

	res := applier.Apply(endpoint, model, &batch)
	fmt.Printf("stored %d blocks\n", res.StoredBlocks)

	keys := kvindex.Keys(nil, []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9}, 4, &kvindex.KeyParams{Model: model})
	var m kvindex.MatchResult
	ix.Match(keys, []string{endpoint}, &m)
	fmt.Printf("%s holds %d of %d blocks\n", m.Endpoints()[0].Endpoint, m.Endpoints()[0].Blocks, m.Total)
	// Output:
	// BlockStored: 2 blocks, hash 0x8a3f1c2d4e5b6a79, medium GPU, group 0 (full_attention)
	// stored 2 blocks
	// 10.0.0.1:8000 holds 2 of 2 blocks
}

// ExampleAppendBatch encodes an AllBlocksCleared batch as current vLLM and
// as SGLang write it (golden vector V4 and its positional form).
func ExampleAppendBatch() {
	b := &wire.Batch{TS: 1700000000.5, HasDPRank: true,
		Events: []wire.Event{{Type: wire.EventAllBlocksCleared}}}
	fmt.Println(hex.EncodeToString(wire.AppendBatch(nil, b, wire.FormatVLLM)))
	fmt.Println(hex.EncodeToString(wire.AppendBatch(nil, b, wire.FormatSGLang)))
	// Output:
	// 93cb41d954fc402000009181a474797065b0416c6c426c6f636b73436c656172656400
	// 93cb41d954fc402000009191b0416c6c426c6f636b73436c656172656400
}
