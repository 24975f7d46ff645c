package publish

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kvroute/kvroute/internal/zmqx"
)

// BenchmarkPublisherToSub publishes 1 KiB payloads to one go-zeromq SUB over
// loopback and waits until the subscriber has received every one of them.
func BenchmarkPublisherToSub(b *testing.B) {
	p := newTestPublisher(b, Config{Endpoint: "10.0.0.1:8000", Model: "m", SendQueue: 1 << 20})
	defer p.Close()
	s := subscribe(b, p, "kv@")
	defer zmqx.CloseDrain(s)
	payload := make([]byte, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	done := make(chan error, 1)
	go func() {
		for i := range b.N {
			m, err := s.Recv()
			if err == nil && binary.BigEndian.Uint64(m.Frames[1]) != uint64(i) {
				err = errPubBenchSeq
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range b.N {
		if _, err := p.Publish(payload); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if d := p.Stats().Dropped; d != 0 {
		b.Fatalf("%d dropped", d)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

var errPubBenchSeq = errors.New("sequence out of order")
