package publish_test

import (
	"context"
	"fmt"

	"github.com/kvroute/kvroute/kvevents/publish"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/replay"
)

// A Go engine publishes its KV events like vLLM does; a router that missed
// them replays them from the publisher's replay socket.
func ExamplePublisher() {
	pub, err := publish.New(publish.Config{
		Addr:       "127.0.0.1:0",
		Endpoint:   "10.0.0.1:8000",
		Model:      "meta-llama/Llama-3.1-8B-Instruct",
		ReplayAddr: "127.0.0.1:0",
	}, publish.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pub.Close()
	fmt.Println("topic:", pub.Topic())

	batch := &wire.Batch{TS: 1.0, Events: []wire.Event{{Type: wire.EventAllBlocksCleared}}}
	for range 3 {
		seq, err := pub.PublishBatch(batch)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("published seq", seq)
	}

	client, _ := replay.NewClient(replay.ClientConfig{}, replay.Options{})
	res, err := client.Replay(context.Background(), pub.ReplayEndpoint(), 1, func(seq uint64, payload []byte) error {
		fmt.Println("replayed seq", seq, "non-empty:", len(payload) > 0)
		return nil
	})
	fmt.Println(res.Outcome(), err)
	// Output:
	// topic: kv@10.0.0.1:8000@meta-llama/Llama-3.1-8B-Instruct
	// published seq 0
	// published seq 1
	// published seq 2
	// replayed seq 1 non-empty: true
	// replayed seq 2 non-empty: true
	// complete <nil>
}
