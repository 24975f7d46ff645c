package kvevents_test

import (
	"fmt"
	"time"

	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvevents/publish"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// A pool subscribes to an engine's KV events and keeps the index current.
// The engine published a batch before the router subscribed: the proactive
// replay on connect delivers it.
func ExamplePool() {
	const blockSize = 16
	tokens := make([]uint32, 2*blockSize) // a two-block prompt
	for i := range tokens {
		tokens[i] = uint32(100 + i)
	}
	stored := &wire.Batch{Events: []wire.Event{{
		Type: wire.EventBlockStored, BlockHashes: []uint64{11, 12},
		TokenIDs: tokens, BlockSize: blockSize,
	}}}

	// The engine: a Go publisher with a replay socket.
	pub, err := publish.New(publish.Config{
		Addr: "127.0.0.1:0", Endpoint: "10.0.0.1:8000", Model: "my-model", ReplayAddr: "127.0.0.1:0",
	}, publish.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pub.Close()
	if _, err := pub.PublishBatch(stored); err != nil { // nobody subscribed yet: the replay buffer keeps it
		fmt.Println(err)
		return
	}

	// The router: an index and a pool.
	ix, err := kvindex.New(kvindex.Config{BlockSize: blockSize}, kvindex.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ix.Close()
	decode := func(labels map[string]string) bool { return labels["role"] == "decode" }
	pool, err := kvevents.NewPool(kvevents.PoolConfig{}, ix, kvevents.Options{Matcher: decode})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	err = pool.Ensure(kvevents.Endpoint{
		ID:            "10.0.0.1:8000",
		EventsAddress: pub.Endpoint(),
		ReplayAddress: pub.ReplayEndpoint(),
		Labels:        map[string]string{"role": "decode"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// The engine keeps publishing (empty batches here). The first message the
	// pool receives, with no watermark yet, triggers a replay from sequence
	// 0, which brings the batch published before the subscription.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		st, _ := pool.Status("10.0.0.1:8000")
		if st.HasApplied && st.Applied >= 1 && !st.Replaying {
			break
		}
		if !st.Received {
			if _, err := pub.PublishBatch(&wire.Batch{}); err != nil { // an empty batch: keeps the stream moving
				fmt.Println(err)
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}

	keys := kvindex.Keys(nil, tokens, blockSize, &kvindex.KeyParams{Model: "my-model"})
	var res kvindex.MatchResult
	ix.Match(keys, []string{"10.0.0.1:8000"}, &res)
	fmt.Printf("%s holds %d of %d blocks\n", res.Endpoints()[0].Endpoint, res.Endpoints()[0].Blocks, res.Total)
	// Output:
	// 10.0.0.1:8000 holds 2 of 2 blocks
}

// A stream position, as saved with an index checkpoint and passed back to
// Pool.EnsureFrom: the last applied sequence and the digest of that batch's
// payload, which tells a continuation from a restarted engine.
func ExamplePosition() {
	payload := wire.AppendBatch(nil, &wire.Batch{TS: 1,
		Events: []wire.Event{{Type: wire.EventAllBlocksCleared}}}, wire.FormatVLLM)
	pos := kvevents.Position{Seq: 41, Digest: kvevents.PayloadDigest(payload)}
	fmt.Println(pos.Seq, pos.Digest == kvevents.PayloadDigest(payload))
	// Output: 41 true
}
