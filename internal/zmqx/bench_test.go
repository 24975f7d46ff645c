package zmqx

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// BenchmarkGuardedSubThroughput measures a go-zeromq SUB reading 1 KiB
// vLLM-framed messages through the guarded transport (deadline re-armed on
// every read, frame scanning) from a Listener-based PUB over loopback.
func BenchmarkGuardedSubThroughput(b *testing.B) {
	pub := startTestPub(b, Options{})
	defer pub.Close()
	s := NewSub(context.Background(), Options{IdleTimeout: 30 * time.Second}, nil)
	defer CloseDrain(s)
	if err := Dial(s, pub.Addr()); err != nil {
		b.Fatal(err)
	}
	pub.waitSubscriber(b)
	topic, payload := []byte("kv@10.0.0.1:8000@m"), make([]byte, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	go func() {
		seq := make([]byte, 8)
		for i := range b.N {
			binary.BigEndian.PutUint64(seq, uint64(i))
			pub.Send(topic, seq, payload)
		}
	}()
	for i := range b.N {
		m, err := s.Recv()
		if err != nil {
			b.Fatal(err)
		}
		if m.Type == zmq4.CmdMsg || len(m.Frames) != 3 || binary.BigEndian.Uint64(m.Frames[1]) != uint64(i) {
			b.Fatalf("message %d out of order or malformed", i)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
