package kvevents

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/internal/zmqx"
)

// publishBatches publishes batches first..first+n-1 (by batch id, whatever
// their sequence) and returns the last sequence.
func publishBatches(t testing.TB, pub *zmqpub.Publisher, first uint64, n int) uint64 {
	t.Helper()
	var last uint64
	for i := range n {
		seq, err := pub.Publish(poolPayload(first + uint64(i)))
		require.NoError(t, err)
		last = seq
	}
	return last
}

// An engine down for longer than 5 s (longer than go-zeromq's own retry
// budget of ~2.5 s) is reattached by the supervisor's capped backoff, and
// its new lifetime (sequences from 0) replaces the old one in the index.
// The engine's port lies outside the ephemeral range (testport), so no
// other socket takes it during the outage.
func TestPoolOutageLongerThanFiveSecondsResumes(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Addr: testport.Addr(t), Endpoint: "127.0.0.1:8000", Model: poolModel})
	addr := pub.Endpoint()
	p, logs := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, EventsAddress: addr}))
	publishUntilReceived(t, p, pub, id)
	last := publishN(t, pub, 50)
	waitApplied(t, p, id, last)
	require.NoError(t, pub.Close())

	m := p.metrics()
	connectErrs := func() float64 { return counter(m.ZMQErrors, id, "connect") }
	outage := time.Now()
	require.Eventually(t, func() bool {
		return time.Since(outage) > 5500*time.Millisecond && connectErrs() >= 3
	}, 20*time.Second, 50*time.Millisecond, "the supervisor keeps redialling during the outage")

	pub2 := newTestPublisher(t, zmqpub.Config{Addr: addr, Endpoint: id, Model: poolModel})
	defer pub2.Close()
	// Publish once the supervisor is back, so that the first sequence it
	// sees is below the old watermark (a restart it can recognise).
	// The backoff is capped (2 s by default): the supervisor reattaches
	// within a few capped waits, whatever the outage's length.
	require.Eventually(t, func() bool { return pub2.Stats().Subscribers == 1 }, 10*time.Second, poolTick,
		"the supervisor never reattached")
	var published []uint64
	require.Eventually(t, func() bool {
		published = append(published, 1000+publishBatches(t, pub2, 1000+pub2.Stats().Published, 1))
		for _, b := range published {
			if heldBlocks(ix, id, b) == poolBlocks {
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "delivery never resumed: %s", logs)
	require.GreaterOrEqual(t, counter(m.Reconnections, id), 1.0)
	require.Equal(t, 1.0, counter(m.PublisherRestarts, id), "sequence went back to 0")
	require.Zero(t, heldBlocks(ix, id, 3), "the previous lifetime was cleared")
	require.Contains(t, logs.String(), "Publisher restarted")
	require.NoError(t, p.Close())
	require.NoError(t, pub2.Close())
}

// zmtpHugeFramePeer accepts connections, completes a ZMTP 3 handshake as a
// PUB, then announces a 1 TiB frame. Without kvroute's frame guard go-zeromq
// would allocate it and the process would die.
type zmtpHugeFramePeer struct {
	l     net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func newHugeFramePeer(t *testing.T) *zmtpHugeFramePeer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &zmtpHugeFramePeer{l: l}
	h.wg.Add(1)
	go h.accept()
	return h
}

// hugeFrameGreeting is what a hostile ZMTP 3 PUB sends: a NULL-mechanism
// greeting, a READY command, then the header of a 1 TiB message frame.
func hugeFrameGreeting() []byte {
	greeting := make([]byte, 64)
	copy(greeting, []byte{0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0})
	copy(greeting[12:], "NULL")
	ready := []byte{0x04, 0}
	ready = append(ready, 5)
	ready = append(ready, "READY"...)
	ready = append(ready, 11)
	ready = append(ready, "Socket-Type"...)
	ready = binary.BigEndian.AppendUint32(ready, 3)
	ready = append(ready, "PUB"...)
	ready[1] = byte(len(ready) - 2)
	huge := binary.BigEndian.AppendUint64([]byte{0x02}, 1<<40)
	return append(append(greeting, ready...), huge...)
}

func (h *zmtpHugeFramePeer) addr() string { return "tcp://" + h.l.Addr().String() }

func (h *zmtpHugeFramePeer) accept() {
	defer h.wg.Done()
	for {
		c, err := h.l.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		h.conns = append(h.conns, c)
		h.mu.Unlock()
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			defer c.Close()
			if _, err := c.Write(hugeFrameGreeting()); err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, c) // until the subscriber hangs up
		}()
	}
}

func (h *zmtpHugeFramePeer) close() {
	_ = h.l.Close()
	h.mu.Lock()
	for _, c := range h.conns {
		_ = c.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// A peer announcing a huge frame loses its connection, again and again; the
// process lives and the other endpoints keep flowing.
func TestPoolHugeFrameFailsOnlyThatConnection(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	bad := newHugeFramePeer(t)
	defer bad.close()
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel})
	defer pub.Close()
	p, _ := newTestPool(t, PoolConfig{MaxBackoff: 200 * time.Millisecond}, ix)
	defer p.Close()
	const good, hostile = "127.0.0.1:8000", "127.0.0.1:9666"
	require.NoError(t, p.Ensure(Endpoint{ID: hostile, EventsAddress: bad.addr()}))
	require.NoError(t, p.Ensure(Endpoint{ID: good, EventsAddress: pub.Endpoint()}))

	m := p.metrics()
	require.Eventually(t, func() bool { return counter(m.ZMQErrors, hostile, "recv") >= 3 },
		poolWait, poolTick, "the hostile connection fails and is retried")
	publishUntilReceived(t, p, pub, good)
	last := publishN(t, pub, 20)
	waitApplied(t, p, good, last)
	require.Equal(t, poolBlocks, heldBlocks(ix, good, last))
	st, _ := p.Status(hostile)
	require.False(t, st.Received, "nothing from the hostile peer was accepted")
	require.Equal(t, 2.0, testutil.ToFloat64(m.ActiveSubscribers), "both supervisors alive")
	require.NoError(t, p.Close())
}

// 100 endpoints ensured (twice: idempotent) and removed, three times over:
// every round subscribes, indexes and then releases everything.
func TestPoolEnsureAndRemoveHundredEndpoints(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel})
	defer pub.Close()
	p, _ := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	const n = 100
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "127.0.0.1:" + strconv.Itoa(20000+i) // one publisher feeds them all
	}
	m := p.metrics()
	for round := range 3 {
		subs := map[string]*subscriber{}
		for pass := range 2 {
			for _, id := range ids {
				require.NoError(t, p.Ensure(Endpoint{ID: id, EventsAddress: pub.Endpoint(), Labels: map[string]string{"round": strconv.Itoa(round)}}))
				sub := p.src.(*dialer).subs[id]
				if pass == 0 {
					subs[id] = sub
				} else {
					// A subscriber may reconnect on its own (a heartbeat
					// missed on a loaded machine); an unchanged Ensure
					// must not replace it.
					require.Same(t, subs[id], sub, "an unchanged Ensure keeps the subscriber")
				}
			}
		}
		require.Len(t, p.Endpoints(), n)
		require.Equal(t, float64(n), testutil.ToFloat64(m.ActiveSubscribers))
		require.Eventually(t, func() bool {
			_, _ = pub.Publish(poolPayload(uint64(round)))
			for _, id := range ids {
				if st, _ := p.Status(id); !st.HasApplied {
					return false
				}
			}
			return true
		}, poolWait, 20*time.Millisecond, "round %d: not every endpoint indexed", round)
		require.Equal(t, n, ix.Stats().Endpoints)
		for _, id := range ids {
			p.Remove(id)
		}
		require.Empty(t, p.Endpoints())
		require.Zero(t, ix.Stats().Endpoints, "round %d: Remove clears the index", round)
		require.Zero(t, testutil.ToFloat64(m.ActiveSubscribers))
		require.Eventually(t, func() bool { return pub.Stats().Subscribers == 0 }, poolWait, poolTick)
	}
	require.NoError(t, p.Close())
	require.NoError(t, pub.Close())
}

// Ensure replaces a subscriber whose address changed, keeps one whose labels
// changed but still match, and drops (and clears) one that stops matching.
func TestPoolEnsureReplacesAndSelects(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	pubA := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel})
	defer pubA.Close()
	pubB := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel})
	defer pubB.Close()
	p, _ := newSelectingPool(t, PoolConfig{}, ix, "role=decode, zone in (a,b), !draining")
	defer p.Close()
	const id = "127.0.0.1:8000"
	ep := Endpoint{ID: id, EventsAddress: pubA.Endpoint(), Labels: map[string]string{"role": "decode", "zone": "a"}}

	require.NoError(t, p.Ensure(ep))
	publishUntilReceived(t, p, pubA, id)
	waitApplied(t, p, id, publishBatches(t, pubA, 500, 1))
	require.Equal(t, poolBlocks, heldBlocks(ix, id, 500))
	sub := p.src.(*dialer).subs[id]

	ep.Labels = map[string]string{"role": "decode", "zone": "b"}
	require.NoError(t, p.Ensure(ep))
	require.Same(t, sub, p.src.(*dialer).subs[id], "label change that still matches keeps the subscriber")

	ep.Labels = map[string]string{"role": "decode", "zone": "b", "draining": ""}
	require.NoError(t, p.Ensure(ep))
	_, ok := p.Status(id)
	require.False(t, ok, "no longer selected")
	require.Zero(t, heldBlocks(ix, id, 500), "its entries are cleared")

	delete(ep.Labels, "draining")
	ep.EventsAddress = pubB.Endpoint()
	require.NoError(t, p.Ensure(ep))
	publishUntilReceived(t, p, pubB, id)
	waitApplied(t, p, id, publishBatches(t, pubB, 600, 1))
	require.Equal(t, poolBlocks, heldBlocks(ix, id, 600))
	require.NotSame(t, sub, p.src.(*dialer).subs[id])

	require.Error(t, p.Ensure(Endpoint{ID: "no-port"}))
	require.Error(t, p.Ensure(Endpoint{ID: "10.0.0.1:80", EventsAddress: "ipc:///tmp/x"}))
	require.NoError(t, p.Close())
	require.ErrorIs(t, p.Ensure(ep), errPoolClosed)
}

// Live messages that are not [topic, seq8, payload] are counted and skipped;
// the stream carries on.
func TestPoolMalformedMessagesCountedAndSkipped(t *testing.T) {
	defer leakcheck.Check(t)()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := zmqx.Listen(ctx, "127.0.0.1:0", zmq4.Pub, zmqx.Options{}, nil)
	require.NoError(t, err)
	defer l.Close()
	ix := newPoolIndex(t)
	p, _ := newTestPool(t, PoolConfig{}, ix)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, EventsAddress: l.Endpoint(), Model: poolModel}))
	c, err := l.Accept()
	require.NoError(t, err)
	defer c.Close()

	topic := []byte("kv@" + id + "@" + poolModel)
	seq8 := func(s uint64) []byte { return binary.BigEndian.AppendUint64(nil, s) }
	require.NoError(t, c.WriteMsg(topic, []byte{0, 0, 0, 1}, poolPayload(9)))             // 4-byte sequence
	require.NoError(t, c.WriteMsg(topic))                                                 // 1 frame
	require.NoError(t, c.WriteMsg(topic, seq8(0), poolPayload(9), []byte("extra frame"))) // 4 frames
	require.NoError(t, c.WriteMsg(topic, seq8(0), poolPayload(0)))
	require.NoError(t, c.WriteMsg(topic, seq8(1), poolPayload(1)))
	waitApplied(t, p, id, 1)
	m := p.metrics()
	require.Equal(t, 3.0, counter(m.Dropped, id, string(dropMalformed)))
	require.Equal(t, 2.0, counter(m.MessagesReceived, id))
	require.Zero(t, counter(m.SequenceGaps, id))
	require.True(t, heldBlocks(ix, id, 0) == poolBlocks && heldBlocks(ix, id, 1) == poolBlocks)
	require.NoError(t, p.Close())
}
