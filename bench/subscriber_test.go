package bench

import (
	"testing"
	"time"

	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvevents/publish"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// BenchmarkSubscriberThroughput measures the whole event path over
// loopback TCP: a publish.Publisher (one engine, current vLLM format,
// topic kv@<ip:port>@<model>) → ZeroMQ → the kvevents.Pool (supervised SUB,
// sequence tracking, bounded worker queue, decode, apply) → the index. Each
// message is one BlockStored batch of 16 blocks × 64 tokens starting a new
// chain. The publisher keeps at most 1,024 messages outstanding so that no
// queue overflows, and the benchmark checks that every message was applied
// in sequence and every block stored. The index keeps at most 2^18 blocks
// for the endpoint (older ones are evicted), so memory stays bounded.
// Publisher, pool and benchmark share the machine's cores.
func BenchmarkSubscriberThroughput(b *testing.B) {
	const (
		blocks = 16
		window = 1024
		id     = "127.0.0.1:8000"
	)
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1, MaxBlocksPerEndpoint: 1 << 18}, kvindex.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	pool, err := kvevents.NewPool(kvevents.PoolConfig{QueueSize: 4 * window, Concurrency: 1}, ix, kvevents.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	pub, err := publish.New(publish.Config{Addr: "127.0.0.1:0", Endpoint: id, Model: Model, SendQueue: 4 * window}, publish.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	if err := pool.Ensure(kvevents.Endpoint{ID: id, EventsAddress: pub.Endpoint()}); err != nil {
		b.Fatal(err)
	}
	bs := ix.BlockSize()
	batch := &wire.Batch{Events: []wire.Event{{
		Type: wire.EventBlockStored, BlockHashes: make([]uint64, blocks), TokenIDs: Tokens(13, blocks*bs),
		BlockSize: bs, Medium: "GPU", HasGroup: true, Group: 0, Kind: "full_attention",
	}}}
	ev := &batch.Events[0]
	var last uint64
	publish := func(n uint64) {
		ev.TokenIDs[0] = uint32(n % 150000) // a new chain: every block is new
		ev.TokenIDs[1] = uint32(n / 150000)
		for j := range ev.BlockHashes {
			ev.BlockHashes[j] = n<<8 | uint64(j)
		}
		seq, err := pub.PublishBatch(batch)
		if err != nil {
			b.Fatal(err)
		}
		last = seq
	}
	waitApplied := func(seq uint64) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			if st, ok := pool.Status(id); ok && st.HasApplied && st.Applied >= seq {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("pool stuck below sequence %d", seq)
			}
			time.Sleep(20 * time.Microsecond) // polling: the pool exposes no completion signal
		}
	}
	// Warm up until the subscription is live (ZeroMQ's slow joiner).
	deadline := time.Now().Add(10 * time.Second)
	for n := uint64(1 << 40); ; n++ {
		publish(n)
		if st, ok := pool.Status(id); ok && st.HasApplied {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("subscription never became live")
		}
		time.Sleep(time.Millisecond)
	}
	waitApplied(last)
	before := pool.Stats()

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if i%256 == 0 && last > window {
			waitApplied(last - window)
		}
		publish(uint64(i))
	}
	waitApplied(last)
	elapsed := time.Since(start)
	b.StopTimer()

	after := pool.Stats()
	if got := after.Applied - before.Applied; got != uint64(b.N) {
		b.Fatalf("applied %d messages, want %d", got, b.N)
	}
	if got := after.StoredBlocks - before.StoredBlocks; got != uint64(b.N*blocks) {
		b.Fatalf("stored %d blocks, want %d", got, b.N*blocks)
	}
	// The last message's blocks are in the index.
	keys := kvindex.Keys(nil, ev.TokenIDs, bs, &kvindex.KeyParams{Model: Model})
	var out kvindex.MatchResult
	ix.Match(keys, []string{id}, &out)
	if out.Endpoints()[0].Blocks != blocks {
		b.Fatalf("last message matches %d blocks, want %d", out.Endpoints()[0].Blocks, blocks)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(b.N*blocks)/elapsed.Seconds(), "blocks/s")
}
