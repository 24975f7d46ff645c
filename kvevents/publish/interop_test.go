package publish

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/stretchr/testify/require"
)

// A libzmq SUB (pyzmq) subscribes to the Go Publisher: the handshake, the
// ZMTP 3.0 subscription and the 3-frame messages interoperate. Skipped
// without python3-zmq unless KVROUTE_REQUIRE_INTEROP=1.
func TestInteropLibzmqSubscriberReceivesFromPublisher(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	p := newTestPublisher(t, Config{Endpoint: "10.0.0.1:8000", Model: "m"})
	defer p.Close()
	const sub = `
import sys, zmq
ctx = zmq.Context()
s = ctx.socket(zmq.SUB)
s.setsockopt(zmq.SUBSCRIBE, b"kv@10.0.0.1:8000@")
s.setsockopt(zmq.RCVTIMEO, 10000)
s.connect(sys.argv[1])
last = None
for _ in range(5):
    topic, seq, payload = s.recv_multipart()
    seq = int.from_bytes(seq, "big")
    assert last is None or seq == last + 1, (last, seq)
    last = seq
    print(topic.decode(), seq, payload.decode())
s.close(linger=0)
ctx.term()
`
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := make(chan string, 1)
	go func() {
		b, err := pytest.Run(ctx, sub, p.Endpoint())
		if err != nil {
			b = append(b, "\nerror: "+err.Error()...)
		}
		out <- string(b)
	}()
	// Publish until the subscription arrives (slow joiner), then five more.
	require.Eventually(t, func() bool {
		if p.Stats().Queued > 0 {
			return true
		}
		_, _ = p.Publish([]byte("warm-up"))
		return false
	}, 10*time.Second, 10*time.Millisecond)
	for range 5 {
		_, err := p.Publish([]byte("hello"))
		require.NoError(t, err)
	}
	o := <-out
	require.NotContains(t, o, "error", o)
	lines := strings.Split(strings.TrimSpace(o), "\n")
	require.Len(t, lines, 5, o)
	for _, l := range lines {
		require.True(t, strings.HasPrefix(l, "kv@10.0.0.1:8000@m "), l)
	}
}
