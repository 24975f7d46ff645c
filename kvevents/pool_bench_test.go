package kvevents

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// BenchmarkSubscriberThroughput measures the whole path over loopback: Go
// publishers → ZeroMQ → pool (supervised SUB, sequencing, bounded worker
// queues, decode, apply) → index. Each message is one BlockStored batch of
// 4 blocks × 16 tokens. The publishers are paced by a window of
// outstanding messages so that no queue overflows; the benchmark checks
// that every message was applied and every block stored.
func BenchmarkSubscriberThroughput(b *testing.B) {
	for _, eps := range []int{1, 4} {
		b.Run("endpoints="+strconv.Itoa(eps), func(b *testing.B) { benchThroughput(b, eps) })
	}
}

func benchThroughput(b *testing.B, eps int) {
	const (
		blocks = 4
		window = 2048
	)
	ix, err := kvindex.New(kvindex.Config{BlockSize: poolBlockSize, SweepInterval: -1}, kvindex.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	p, err := NewPool(PoolConfig{QueueSize: 4 * window}, ix, Options{Set: telemetry.Set{Registerer: prometheus.NewRegistry(), Logger: nil}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	pubs := make([]*zmqpub.Publisher, eps)
	ids := make([]string, eps)
	for i := range pubs {
		ids[i] = "127.0.0.1:" + strconv.Itoa(8000+i)
		pubs[i] = newTestPublisher(b, zmqpub.Config{Endpoint: ids[i], Model: poolModel, SendQueue: 4 * window})
		defer pubs[i].Close()
		if err := p.Ensure(Endpoint{ID: ids[i], EventsAddress: pubs[i].Endpoint()}); err != nil {
			b.Fatal(err)
		}
	}
	batch := poolBatch(0, blocks)
	ev := &batch.Events[0]
	fill := func(n uint64) {
		for j := range ev.BlockHashes {
			ev.BlockHashes[j] = (n+1)*1000 + uint64(j)
		}
		for k := range ev.TokenIDs {
			ev.TokenIDs[k] = uint32((n*7919 + uint64(k)) % 50000)
		}
	}
	lastSeq := make([]uint64, eps)
	var buf []byte
	publish := func(ep int, n uint64) {
		fill(n)
		buf = wire.AppendBatch(buf[:0], batch, wire.FormatVLLM)
		seq, err := pubs[ep].Publish(buf)
		if err != nil {
			b.Fatal(err)
		}
		lastSeq[ep] = seq
	}
	applied := func(ep int) (uint64, bool) {
		st, _ := p.Status(ids[ep])
		return st.Applied, st.HasApplied
	}
	waitFor := func(ep int, seq uint64) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			if a, ok := applied(ep); ok && a >= seq {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("endpoint %s stuck below seq %d", ids[ep], seq)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	// Warm up: until each subscription is live and applied.
	for ep := range pubs {
		deadline := time.Now().Add(10 * time.Second)
		for {
			publish(ep, 1<<40)
			if _, ok := applied(ep); ok {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("subscription never became live")
			}
			time.Sleep(time.Millisecond)
		}
		waitFor(ep, lastSeq[ep])
	}
	before := p.Stats()

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		ep := i % eps
		if i/eps%256 == 0 && lastSeq[ep] > window {
			waitFor(ep, lastSeq[ep]-window) // at most ~window messages in flight
		}
		publish(ep, uint64(i))
	}
	for ep := range pubs {
		waitFor(ep, lastSeq[ep])
	}
	elapsed := time.Since(start)
	b.StopTimer()

	after := p.Stats()
	if got := after.Applied - before.Applied; got != uint64(b.N) {
		b.Fatalf("applied %d messages, want %d", got, b.N)
	}
	if got := after.StoredBlocks - before.StoredBlocks; got != uint64(b.N*blocks) {
		b.Fatalf("stored %d blocks, want %d", got, b.N*blocks)
	}
	for _, id := range ids {
		if d := testutil.ToFloat64(p.metrics().SequenceGaps.WithLabelValues(id)); d != 0 {
			b.Fatalf("%s: %v sequence gaps", id, d)
		}
	}
	if ix.Stats().Blocks == 0 {
		b.Fatal("index is empty")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(b.N*blocks)/elapsed.Seconds(), "blocks/s")
}
