package zmqpub

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/replay"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func newTestPublisher(t testing.TB, cfg Config, opts ...Options) *Publisher {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	p, err := New(cfg, o)
	require.NoError(t, err)
	return p
}

// subscribe dials p with a go-zeromq SUB through the guarded transport and
// waits until the publisher has registered the subscription (so nothing is
// lost to the slow-joiner window).
func subscribe(t testing.TB, p *Publisher, prefix string) zmq4.Socket {
	t.Helper()
	before := p.Stats().Subscribers
	s := zmqx.NewSub(context.Background(), zmqx.Options{IdleTimeout: 10 * time.Second}, nil)
	require.NoError(t, s.SetOption(zmq4.OptionSubscribe, prefix))
	require.NoError(t, zmqx.Dial(s, p.Endpoint()))
	require.Eventually(t, func() bool {
		return p.Stats().Subscribers > before && p.HasSubscription(prefix)
	}, 5*time.Second, 2*time.Millisecond)
	return s
}

func TestPublisherFramesAndSequences(t *testing.T) {
	defer leakcheck.Check(t)()
	p := newTestPublisher(t, Config{Endpoint: "10.0.0.1:8000", Model: "meta-llama/Llama-3.1-8B"})
	defer p.Close()
	require.Equal(t, "kv@10.0.0.1:8000@meta-llama/Llama-3.1-8B", p.Topic())
	s := subscribe(t, p, "kv@")
	defer zmqx.CloseDrain(s)

	for i := range 50 {
		seq, err := p.Publish(fmt.Appendf(nil, "payload-%d", i))
		require.NoError(t, err)
		require.Equal(t, uint64(i), seq)
	}
	for i := range 50 {
		m, err := s.Recv()
		require.NoError(t, err)
		require.Len(t, m.Frames, 3)
		require.Equal(t, p.Topic(), string(m.Frames[0]))
		require.Equal(t, uint64(i), binary.BigEndian.Uint64(m.Frames[1]))
		require.Equal(t, fmt.Sprintf("payload-%d", i), string(m.Frames[2]))
	}
	_, err := p.Publish(nil)
	require.ErrorIs(t, err, ErrEmptyPayload)
}

func TestPublisherHonoursSubscriptions(t *testing.T) {
	defer leakcheck.Check(t)()
	p := newTestPublisher(t, Config{Endpoint: "10.0.0.1:8000", Model: "m"})
	defer p.Close()
	match := subscribe(t, p, "kv@10.0.0.1")
	defer zmqx.CloseDrain(match)
	other := subscribe(t, p, "kv@10.0.0.2")
	defer zmqx.CloseDrain(other)

	for range 10 {
		_, err := p.Publish([]byte("x"))
		require.NoError(t, err)
	}
	st := p.Stats()
	require.EqualValues(t, 10, st.Published)
	require.EqualValues(t, 10, st.Queued, "only the matching subscriber gets messages")
	require.Equal(t, 2, st.Subscribers)
	for range 10 {
		_, err := match.Recv()
		require.NoError(t, err)
	}
}

func TestPublisherSubscribeCommandsAndCancel(t *testing.T) {
	defer leakcheck.Check(t)()
	p := newTestPublisher(t, Config{Topic: "kv@a@m"})
	defer p.Close()
	// A ZMTP 3.1 peer subscribes with SUBSCRIBE/CANCEL commands.
	c := dialRawSub(t, p, 1)
	defer c.Close()
	cmd := func(name, body string) []byte {
		b := append([]byte{byte(len(name))}, name...)
		b = append(b, body...)
		return append([]byte{0x04, byte(len(b))}, b...)
	}
	_, err := c.Write(cmd("SUBSCRIBE", "kv@"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, _ = p.Publish([]byte("probe"))
		return p.Stats().Queued > 0
	}, 5*time.Second, 5*time.Millisecond)
	_, err = c.Write(cmd("CANCEL", "kv@"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		q := p.Stats().Queued
		_, _ = p.Publish([]byte("probe"))
		return p.Stats().Queued == q
	}, 5*time.Second, 5*time.Millisecond)

	// A message that is no subscription (a first byte other than 0 or 1;
	// two frames) is ignored and counted; the connection stays.
	_, err = c.Write([]byte{0x00, 3, 'x', 'y', 'z'})
	require.NoError(t, err)
	_, err = c.Write([]byte{0x01, 1, 1, 0x00, 1, 1})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return p.Stats().Invalid == 2 }, 5*time.Second, time.Millisecond)
	require.Equal(t, 1, p.Stats().Subscribers)
}

func TestPublisherBoundsMemoryWithStuckSubscriber(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	// WriteTimeout is long enough that, once the kernel's buffers are full
	// and the writer blocks, the burst below fills the 16-message queue
	// before the stuck subscriber is dropped, even where each Publish is
	// slow (tens of milliseconds each under -race on a loaded machine): with
	// 300 ms the subscriber was dropped with fewer than 16 messages
	// published since the writer blocked, and nothing was ever shed.
	p := newTestPublisher(t, Config{Topic: "kv@a@m", SendQueue: 16, WriteTimeout: 3 * time.Second}, Options{Set: telemetry.Set{Registerer: reg}})
	defer p.Close()
	// A subscriber that completes the handshake, subscribes, and never reads.
	stuck := zmqx.NewSub(context.Background(), zmqx.Options{}, nil)
	require.NoError(t, stuck.SetOption(zmq4.OptionSubscribe, ""))
	require.NoError(t, zmqx.Dial(stuck, p.Endpoint()))
	defer zmqx.CloseDrain(stuck)
	require.Eventually(t, func() bool { return p.Stats().Subscribers == 1 }, 5*time.Second, 2*time.Millisecond)
	require.Eventually(t, func() bool { // subscription registered
		_, _ = p.Publish([]byte("probe"))
		return p.Stats().Queued > 0
	}, 5*time.Second, 2*time.Millisecond)

	payload := bytes.Repeat([]byte{7}, 256<<10)
	var ms runtime.MemStats
	start := time.Now()
	for range 600 { // 150 MiB offered; go-zeromq's PUB would queue it all
		_, err := p.Publish(payload)
		require.NoError(t, err)
	}
	// A hang bound only (the loop has taken over 20 s under -race beside
	// two other suites): that Publish did not wait for the stuck subscriber
	// is shown by the drops below, which a blocking Publish never makes.
	require.Less(t, time.Since(start), 2*time.Minute, "Publish never blocks")
	runtime.GC()
	runtime.ReadMemStats(&ms)
	require.Less(t, ms.HeapAlloc, uint64(64<<20), "heap stays bounded")
	require.Positive(t, p.Stats().Dropped)
	// The stuck subscriber is disconnected after WriteTimeout once its
	// socket buffers are full. How much of the burst above reached the
	// writer depends on scheduling (on a loaded machine the loop can finish
	// before the writer wrote more than the kernel and go-zeromq buffer, and
	// the writer then never blocks), so keep publishing until it happens.
	require.Eventually(t, func() bool {
		_, err := p.Publish(payload)
		require.NoError(t, err)
		return p.Stats().Subscribers == 0
	}, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, float64(p.Stats().Dropped), counterValue(t, reg, "kvroute_publisher_dropped_total"))
}

func counterValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

func TestPublisherReplayBothLayouts(t *testing.T) {
	defer leakcheck.Check(t)()
	for _, layout := range []replay.Layout{replay.LayoutCurrent, replay.LayoutLegacy} {
		p := newTestPublisher(t, Config{Endpoint: "10.0.0.1:8000", Model: "m",
			ReplayAddr: "127.0.0.1:0", ReplayLayout: layout, BufferSize: 8})
		for i := range 12 {
			_, err := p.Publish(fmt.Appendf(nil, "batch-%d", i))
			require.NoError(t, err)
		}
		cl, err := replay.NewClient(replay.ClientConfig{Limiter: replay.NewLimiter(1)}, replay.Options{})
		require.NoError(t, err)
		var got []string
		res, err := cl.Replay(context.Background(), p.ReplayEndpoint(), 2, func(seq uint64, pl []byte) error {
			got = append(got, fmt.Sprintf("%d:%s", seq, pl))
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, layout, res.Layout)
		require.False(t, res.Covered, "the ring kept only the last 8")
		require.Equal(t, uint64(4), res.First)
		require.Equal(t, "4:batch-4", got[0])
		require.Len(t, got, 8)
		require.NoError(t, p.Close())
	}
}

func TestPublisherCloseWithSubscribersLeavesNothing(t *testing.T) {
	defer leakcheck.Check(t)()
	p := newTestPublisher(t, Config{Topic: "t", ReplayAddr: "127.0.0.1:0"})
	var subs []zmq4.Socket
	for range 3 {
		subs = append(subs, subscribe(t, p, ""))
	}
	// A mute client mid-handshake as well.
	mute, err := net.Dial("tcp", p.l.Addr().String())
	require.NoError(t, err)
	defer mute.Close()
	for range 100 {
		_, _ = p.Publish([]byte("x"))
	}
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "idempotent")
	_, err = p.Publish([]byte("x"))
	require.ErrorIs(t, err, ErrClosed)
	for _, s := range subs {
		_, err := s.Recv() // the connection ended: EOF, or a queued message first
		_ = err
		require.NoError(t, zmqx.CloseDrain(s))
	}
	_, _ = io.Copy(io.Discard, mute) // the publisher closed the mute connection
}

func TestConfig(t *testing.T) {
	for _, c := range []Config{
		{BufferSize: -1}, {SendQueue: -1}, {MaxSubscribers: -1}, {WriteTimeout: -1},
		{HandshakeTimeout: -1}, {ReplayLayout: "v9"},
	} {
		require.Error(t, c.Validate(), "%+v", c)
	}
	_, err := New(Config{Addr: "ipc:///tmp/kv"}, Options{})
	require.Error(t, err)

	reg := prometheus.NewRegistry()
	p := newTestPublisher(t, Config{}, Options{Set: telemetry.Set{Registerer: reg}})
	defer p.Close()
	require.Empty(t, p.Topic(), "vLLM's default topic")
	require.Empty(t, p.ReplayEndpoint())
	require.True(t, strings.HasPrefix(p.Endpoint(), "tcp://127.0.0.1:"))
	_, err = New(Config{Addr: "127.0.0.1:0"}, Options{Set: telemetry.Set{Registerer: reg}})
	require.Error(t, err, "duplicate metrics")
}

// Subscribed counts only the subscribers a Publish reaches: a connection
// whose subscription does not match the topic is connected, not subscribed.
func TestPublisherStatsSubscribed(t *testing.T) {
	defer leakcheck.Check(t)()
	p := newTestPublisher(t, Config{Endpoint: "10.0.0.1:8000", Model: "m"})
	defer p.Close()
	other := subscribe(t, p, "kv@10.0.0.2")
	defer zmqx.CloseDrain(other)
	st := p.Stats()
	require.Equal(t, 1, st.Subscribers)
	require.Equal(t, 0, st.Subscribed)
	mine := subscribe(t, p, "kv@10.0.0.1")
	defer zmqx.CloseDrain(mine)
	st = p.Stats()
	require.Equal(t, 2, st.Subscribers)
	require.Equal(t, 1, st.Subscribed)
}

// A subscriber beyond MaxSubscribers is closed at once and a connection
// whose ZMTP handshake fails is dropped; both are counted, in Stats and
// as metrics.
func TestPublisherCountsRejectedSubscribersAndFailedHandshakes(t *testing.T) {
	defer leakcheck.Check(t)()
	reg := prometheus.NewRegistry()
	p := newTestPublisher(t, Config{Topic: "t", MaxSubscribers: 1}, Options{Set: telemetry.Set{Registerer: reg}})
	first := subscribe(t, p, "")
	second := zmqx.NewSub(context.Background(), zmqx.Options{IdleTimeout: 10 * time.Second}, nil)
	require.NoError(t, zmqx.Dial(second, p.Endpoint()))
	require.Eventually(t, func() bool { return p.Stats().Rejected == 1 }, time.Minute, time.Millisecond)

	bad, err := net.Dial("tcp", p.l.Addr().String())
	require.NoError(t, err)
	_, err = bad.Write([]byte("GET / HTTP/1.1\r\n\r\n" + strings.Repeat("x", 64)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return p.Stats().Handshakes == 1 }, time.Minute, time.Millisecond)
	_ = bad.Close()
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kvroute_publisher_handshake_failures_total Connections dropped because their ZMTP handshake failed (not a SUB, a bad greeting, a mute peer).
# TYPE kvroute_publisher_handshake_failures_total counter
kvroute_publisher_handshake_failures_total 1
# HELP kvroute_publisher_rejected_subscribers_total Subscriber connections closed at once because the subscriber limit was reached.
# TYPE kvroute_publisher_rejected_subscribers_total counter
kvroute_publisher_rejected_subscribers_total 1
`), "kvroute_publisher_handshake_failures_total", "kvroute_publisher_rejected_subscribers_total"))
	require.NoError(t, p.Close())
	require.NoError(t, zmqx.CloseDrain(first))
	require.NoError(t, zmqx.CloseDrain(second))
}

// dialRawSub connects to p as a raw ZMTP 3.minor SUB peer (greeting and
// READY written by hand, the publisher's READY left unread), so that a test
// can write subscription messages or commands byte for byte.
func dialRawSub(t *testing.T, p *Publisher, minor byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.l.Addr().String())
	require.NoError(t, err)
	greet := make([]byte, 64)
	greet[0], greet[9], greet[10], greet[11] = 0xff, 0x7f, 3, minor
	copy(greet[12:], "NULL")
	ready := append([]byte{5}, "READY"...)
	ready = append(ready, 11)
	ready = append(ready, "Socket-Type"...)
	ready = append(ready, 0, 0, 0, 3)
	ready = append(ready, "SUB"...)
	_, err = c.Write(append(append(greet, 0x04, byte(len(ready))), ready...))
	require.NoError(t, err)
	return c
}
