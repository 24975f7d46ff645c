package replay_test

import (
	"context"
	"fmt"

	"github.com/kvroute/kvroute/replay"
)

// A Go publisher keeps its last batches in a Buffer and serves them; a
// subscriber that missed sequences 2 and up asks for them.
func ExampleClient_Replay() {
	buf := replay.NewBuffer(100)
	for seq := uint64(0); seq < 5; seq++ {
		buf.Add(seq, []byte("kv@10.0.0.1:8000@llama"), fmt.Appendf(nil, "batch %d", seq))
	}
	srv, err := replay.NewServer(replay.ServerConfig{Addr: "127.0.0.1:0"}, buf, replay.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	client, err := replay.NewClient(replay.ClientConfig{}, replay.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := client.Replay(context.Background(), srv.Endpoint(), 2, func(seq uint64, payload []byte) error {
		fmt.Printf("seq %d: %s\n", seq, payload)
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Batches, "batches,", res.Outcome(), "replay, next", res.Next)
	// Output:
	// seq 2: batch 2
	// seq 3: batch 3
	// seq 4: batch 4
	// 3 batches, complete replay, next 5
}
