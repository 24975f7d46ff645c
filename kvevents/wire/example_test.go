package wire_test

import (
	"fmt"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// A publisher encodes a batch in vLLM's layout and names itself in the topic
// frame; a subscriber parses the topic and decodes the payload back.
func Example() {
	out := wire.Batch{TS: 1.5, Events: []wire.Event{{
		Type:        wire.EventBlockStored,
		BlockHashes: []uint64{0xa1, 0xa2},
		TokenIDs:    []uint32{1, 2, 3, 4},
		BlockSize:   2,
	}}}
	payload := wire.AppendBatch(nil, &out, wire.FormatVLLM)
	topic := wire.AppendTopic(nil, "10.0.0.7:8000", "Qwen/Qwen3-8B")

	endpoint, model, ok := wire.ParseTopic(topic)
	fmt.Println(endpoint, model, ok)
	var in wire.Batch
	if err := wire.NewDecoder(wire.Limits{}).Decode(payload, &in); err != nil {
		fmt.Println(err)
		return
	}
	e := in.Events[0]
	fmt.Println(e.Type, e.BlockHashes, e.TokenIDs, e.BlockSize)
	// Output:
	// 10.0.0.7:8000 Qwen/Qwen3-8B true
	// BlockStored [161 162] [1 2 3 4] 2
}
