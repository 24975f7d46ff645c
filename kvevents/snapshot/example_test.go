package snapshot_test

import (
	"context"
	"fmt"

	"github.com/kvroute/kvroute/kvevents/snapshot"
)

// A router that joins mid-stream asks the engine's snapshot socket for the
// whole KV-cache state. Here kvroute's own Server stands in for vLLM's
// recorder on loopback; the Client returns the chunks as the engine sent
// them, for the KV-event stream to decode and apply.
func ExampleClient_Fetch() {
	chunks := [][]byte{[]byte("batch-1"), []byte("batch-2")}
	srv, err := snapshot.NewServer(snapshot.ServerConfig{Addr: "tcp://127.0.0.1:0", PublisherID: [snapshot.PublisherIDSize]byte{7}},
		snapshot.SourceFunc(func() (int64, [][]byte, bool) { return 41, chunks, true }), snapshot.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	c, err := snapshot.NewClient(snapshot.ClientConfig{}, snapshot.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := c.Fetch(context.Background(), srv.Endpoint())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("sequence %d, publisher %x…, %d chunks, %d bytes: %q\n", r.Seq, r.PublisherID[:2], len(r.Chunks), r.Bytes, r.Chunks)
	// Output: sequence 41, publisher 0700…, 2 chunks, 14 bytes: ["batch-1" "batch-2"]
}
