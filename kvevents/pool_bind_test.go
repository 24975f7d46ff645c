package kvevents

import (
	"encoding/binary"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/replay"
)

// enginePub is an engine's PUB that connects to the pool's bind socket
// (vLLM with a connect endpoint): a plain ZMTP 3.0 PUB over loopback TCP
// that sends its greeting and READY, then writes live messages (the
// subscription the pool sends back is left unread; it is a few bytes).
type enginePub struct {
	t     *testing.T
	c     net.Conn
	topic []byte
	seq   uint64
}

func dialEngine(t *testing.T, addr, topic string) *enginePub {
	t.Helper()
	return dialEngineFrom(t, addr, topic, "")
}

// dialEngineFrom is dialEngine from the local IP address from ("" = any):
// every address of 127.0.0.0/8 is loopback on Linux, so a test can play
// engines (or impostors) on several hosts.
func dialEngineFrom(t *testing.T, addr, topic, from string) *enginePub {
	t.Helper()
	var d net.Dialer
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", strings.TrimPrefix(addr, "tcp://"))
	require.NoError(t, err)
	greeting := make([]byte, 64)
	copy(greeting, []byte{0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0})
	copy(greeting[12:], "NULL")
	ready := []byte{0x04, 0, 5}
	ready = append(ready, "READY"...)
	ready = append(ready, 11)
	ready = append(ready, "Socket-Type"...)
	ready = binary.BigEndian.AppendUint32(ready, 3)
	ready = append(ready, "PUB"...)
	ready[1] = byte(len(ready) - 2)
	_, err = c.Write(append(greeting, ready...))
	require.NoError(t, err)
	return &enginePub{t: t, c: c, topic: []byte(topic)}
}

// close closes the connection (idempotent).
func (e *enginePub) close() {
	if e.c != nil {
		_ = e.c.Close()
		e.c = nil
	}
}

// send publishes payload at the given sequence.
func (e *enginePub) send(seq uint64, payload []byte) {
	e.t.Helper()
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	var msg []byte
	for i, f := range [][]byte{e.topic, s[:], payload} {
		flags := byte(0)
		if i < 2 {
			flags = 1 // more
		}
		if len(f) > 255 {
			msg = binary.BigEndian.AppendUint64(append(msg, flags|2), uint64(len(f)))
		} else {
			msg = append(msg, flags, byte(len(f)))
		}
		msg = append(msg, f...)
	}
	_, err := e.c.Write(msg)
	require.NoError(e.t, err)
}

// publishUntil sends batch seq (the shared pool layout) with increasing
// sequences until cond holds, and returns the last sequence sent.
func (e *enginePub) publishUntil(cond func() bool) uint64 {
	e.t.Helper()
	var last uint64
	require.Eventually(e.t, func() bool {
		last = e.seq
		e.send(e.seq, poolPayload(e.seq))
		e.seq++
		return cond()
	}, poolWait, 20*time.Millisecond)
	return last
}

// publishN sends n more batches and returns the last sequence.
func (e *enginePub) publishN(n int) uint64 {
	for range n {
		e.send(e.seq, poolPayload(e.seq))
		e.seq++
	}
	return e.seq - 1
}

func received(p *Pool, id string) func() bool {
	return func() bool { st, ok := p.Status(id); return ok && st.Received }
}

// By default bind mode indexes only endpoints passed to Ensure; every other
// topic is counted in one unlabelled series, and nothing from the wire
// becomes a stream, an index entry or a label value.
func TestBindUnknownTopicsCountedInOneSeries(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	p, _ := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0"}, ix)
	defer p.Close()
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	m := p.metrics()
	e := dialEngine(t, p.bindAddr(), "kv@127.0.0.1:7000@"+poolModel)
	defer e.close()
	e.publishUntil(func() bool { return testutil.ToFloat64(m.BindUnknown) >= 1 })
	base := testutil.ToFloat64(m.BindUnknown)
	for i := range 200 {
		e.topic = []byte("kv@10.9." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250) + ":8000@" + poolModel)
		e.publishN(1)
	}
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.BindUnknown) >= base+200 }, poolWait, poolTick)
	require.Empty(t, p.Endpoints())
	require.Zero(t, ix.Stats().Endpoints)
	require.Zero(t, testutil.CollectAndCount(m.Dropped), "no dropped_total series named after a topic")
	require.Zero(t, testutil.CollectAndCount(m.MessagesReceived))
	require.NoError(t, p.Close())
}

// With BindAnyTopic, topics become streams up to BindMaxStreams; the rest
// are counted as unknown.
func TestBindAnyTopicStreamsCapped(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	p, _ := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0", BindAnyTopic: true, BindMaxStreams: 5}, ix)
	defer p.Close()
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	m := p.metrics()
	e := dialEngine(t, p.bindAddr(), "kv@127.0.0.1:7000@"+poolModel)
	defer e.close()
	e.publishUntil(received(p, "127.0.0.1:7000"))
	for i := range 40 {
		e.topic = []byte("kv@127.0.0.1:" + strconv.Itoa(9000+i) + "@" + poolModel)
		e.publishN(1)
	}
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.BindUnknown) >= 36 }, poolWait, poolTick)
	require.Len(t, p.Endpoints(), 5)
	require.NoError(t, p.Close())
}

// A peer that spoofs a connected engine's topic can neither clear its
// entries with a sequence going back to 0 nor inject blocks; a real restart
// (the engine's connection ends, a new one starts at 0) still resets the
// endpoint.
func TestBindSpoofedTopicCannotClearVictim(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	p, _ := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0"}, ix)
	defer p.Close()
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	const victim = "127.0.0.1:8100"
	require.NoError(t, p.Ensure(Endpoint{ID: victim}))
	topic := "kv@" + victim + "@" + poolModel
	engine := dialEngine(t, p.bindAddr(), topic)
	defer engine.close()
	first := engine.publishUntil(received(p, victim))
	last := engine.publishN(10)
	waitApplied(t, p, victim, last)
	requireHeld(t, ix, victim, first, last)

	m := p.metrics()
	spoof := dialEngine(t, p.bindAddr(), topic)
	defer spoof.close()
	require.Eventually(t, func() bool {
		spoof.send(0, poolPayload(500)) // seq 0, foreign blocks
		return testutil.ToFloat64(m.BindForeign) >= 1
	}, poolWait, 20*time.Millisecond)
	last = engine.publishN(3) // the engine keeps going
	waitApplied(t, p, victim, last)
	requireHeld(t, ix, victim, first, last)
	require.Zero(t, heldBlocks(ix, victim, 500), "no spoofed block indexed")
	require.Zero(t, counter(m.PublisherRestarts, victim))

	// The engine restarts: its connection ends, the new process starts at 0.
	spoof.close()
	engine.close()
	restarted := dialEngine(t, p.bindAddr(), topic)
	defer restarted.close()
	restarted.seq = 0
	restarted.publishUntil(func() bool { return counter(m.PublisherRestarts, victim) >= 1 })
	require.Eventually(t, func() bool { return heldBlocks(ix, victim, last) == 0 }, poolWait, poolTick,
		"a real restart clears the old lifetime's blocks")
	require.NoError(t, p.Close())
}

// An engine connection that takes an endpoint over in bind mode is checked
// as a reconnection is in per-endpoint mode: a replay from the watermark
// itself compares the digest. Here the engine (without a publisher
// identity) restarted while its connection was down, and its new lifetime
// is past the old watermark when its new connection delivers its first
// message: the digest at the watermark differs, so the endpoint is cleared
// and rebuilt from 0. Taken as a sequence gap, the old lifetime's blocks
// stayed in the index beside the new one's.
func TestBindNewConnectionChecksTheWatermark(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	buf := replay.NewBuffer(100)
	srv, err := replay.NewServer(replay.ServerConfig{Addr: "127.0.0.1:0"}, buf, replay.Options{})
	require.NoError(t, err)
	defer srv.Close()
	p, logs := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0", TailProbeDelay: -1,
		ReplayClient: replay.ClientConfig{Limiter: replay.NewLimiter(8)}}, ix)
	defer p.Close()
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	const id = "127.0.0.1:8500"
	require.NoError(t, p.Ensure(Endpoint{ID: id, ReplayAddress: srv.Endpoint()}))
	topic := "kv@" + id + "@" + poolModel
	publish := func(e *enginePub, seq, batch uint64) {
		buf.Add(seq, []byte(topic), poolPayload(batch))
		e.send(seq, poolPayload(batch))
	}

	engine := dialEngine(t, p.bindAddr(), topic)
	defer engine.close()
	for s := uint64(0); s <= 4; s++ {
		publish(engine, s, s)
	}
	waitAppliedLogs(t, p, id, 4, logs)
	requireHeldLogs(t, ix, id, 0, 4, logs)

	// The engine restarts: its connection ends, and its new lifetime
	// publishes 0..9 (other blocks) before it connects again.
	engine.close()
	require.Eventually(t, func() bool { return !statusOf(p, id).Connected }, poolWait, poolTick)
	buf.Reset()
	for s := uint64(0); s <= 9; s++ {
		buf.Add(s, []byte(topic), poolPayload(100+s))
	}
	restarted := dialEngine(t, p.bindAddr(), topic)
	defer restarted.close()
	publish(restarted, 10, 110)
	require.Eventually(t, func() bool { return heldBlocks(ix, id, 110) == poolBlocks }, poolWait, poolTick,
		"%+v\n%s", statusOf(p, id), logs)
	waitAppliedLogs(t, p, id, 10, logs)
	for s := uint64(0); s <= 4; s++ {
		require.Zero(t, heldBlocks(ix, id, s), "the old lifetime's batch %d stayed\n%s", s, logs)
	}
	requireHeldLogs(t, ix, id, 100, 110, logs)
	require.Equal(t, 1.0, counter(p.metrics().PublisherRestarts, id), logs.String())
	require.NoError(t, p.Close())
}

// A stream closed while the engine connection that owns it stays open (its
// endpoint removed and ensured again, relabelled out of the matcher and
// back, or its model changed) is released by that connection: the binder
// keeps references to open streams only, however often this happens on
// one long-lived connection.
func TestBindClosedStreamsReleasedByTheirConnection(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0"}, ix)
	defer p.Close()
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	const id = "127.0.0.1:8600"
	require.NoError(t, p.Ensure(Endpoint{ID: id}))
	engine := dialEngine(t, p.bindAddr(), "kv@"+id+"@"+poolModel)
	defer engine.close()
	engine.publishUntil(received(p, id))
	for i := range 5 {
		if i%2 == 0 {
			p.Remove(id)
			require.NoError(t, p.Ensure(Endpoint{ID: id}))
		} else {
			require.NoError(t, p.Ensure(Endpoint{ID: id, Model: "model-" + strconv.Itoa(i)})) // replaces the stream
		}
		engine.publishUntil(received(p, id)) // a new stream, taken by the same connection
	}
	b := p.src.(*binder)
	b.mu.Lock()
	owners, owned := len(b.owners), 0
	for _, bc := range b.owners {
		owned += len(bc.owned)
	}
	b.mu.Unlock()
	require.Equal(t, 1, owners, "streams owned (closed ones kept)\n%s", logs)
	require.Equal(t, 1, owned, "streams the connection holds (closed ones kept)")
	require.True(t, statusOf(p, id).Connected)
	require.NoError(t, p.Close())
}

// freePortPair returns a loopback port p such that p and p+1 were free,
// both outside the ephemeral range (testport), so that no other socket
// takes them before the pool binds them.
func freePortPair(t *testing.T) int {
	t.Helper()
	port, err := testport.Find(testport.Options{Offsets: []int{0, 1}})
	require.NoError(t, err)
	return port
}

// vLLM offsets the port a data-parallel rank's PUB connects to by the rank,
// and every rank shares one topic. The pool binds port + r for each rank
// and keys each rank's messages to its own endpoint: ranks never merge.
func TestBindDataParallelRanks(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	port := freePortPair(t)
	p, _ := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:" + strconv.Itoa(port), BindRanks: 2}, ix)
	defer p.Close()
	require.Eventually(t, func() bool { a := p.BindAddrs(); return a[0] != "" && a[1] != "" }, poolWait, poolTick)
	require.Equal(t, "tcp://127.0.0.1:"+strconv.Itoa(port+1), p.BindAddrs()[1])
	const rank0, rank1 = "127.0.0.1:8000", "127.0.0.1:8001"
	require.NoError(t, p.Ensure(Endpoint{ID: rank0}))
	require.NoError(t, p.Ensure(Endpoint{ID: rank1, Rank: 1}))
	topic := "kv@" + rank0 + "@" + poolModel // shared by both ranks

	r0 := dialEngine(t, p.BindAddrs()[0], topic)
	defer r0.close()
	r1 := dialEngine(t, p.BindAddrs()[1], topic)
	defer r1.close()
	r1.seq = 100 // distinct blocks per rank
	last0 := r0.publishUntil(received(p, rank0))
	last1 := r1.publishUntil(received(p, rank1))
	waitApplied(t, p, rank0, last0)
	waitApplied(t, p, rank1, last1)
	require.Equal(t, poolBlocks, heldBlocks(ix, rank0, last0))
	require.Equal(t, poolBlocks, heldBlocks(ix, rank1, last1))
	require.Zero(t, heldBlocks(ix, rank0, last1), "rank 1's blocks are not rank 0's")
	require.Zero(t, heldBlocks(ix, rank1, last0))
	require.ElementsMatch(t, []string{rank0, rank1}, p.Endpoints())
	require.NoError(t, p.Close())
}

func TestBindRanksNeedExplicitPort(t *testing.T) {
	require.Error(t, PoolConfig{BindAddress: "127.0.0.1:0", BindRanks: 2}.Validate())
	require.Error(t, PoolConfig{BindAddress: "127.0.0.1:65535", BindRanks: 2}.Validate())
	require.NoError(t, PoolConfig{BindAddress: "127.0.0.1:5557", BindRanks: 4}.Validate())
}

// A peer that connects to the bind socket but never completes a ZMTP
// handshake as a PUB (here: a greeting of garbage) is dropped and counted
// in zmq_errors_total{operation="handshake"} of the bind address; an
// engine connecting afterwards is served as before.
func TestBindFailedHandshakeCounted(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	p, _ := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0"}, ix)
	defer p.Close()
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	m := p.metrics()
	c, err := net.Dial("tcp", strings.TrimPrefix(p.bindAddr(), "tcp://"))
	require.NoError(t, err)
	_, err = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + strings.Repeat("x", 64)))
	require.NoError(t, err)
	handshakes := m.ZMQErrors.WithLabelValues("127.0.0.1:0", "handshake")
	require.Eventually(t, func() bool { return testutil.ToFloat64(handshakes) == 1 }, poolWait, poolTick)
	_ = c.Close()

	e := dialEngine(t, p.bindAddr(), "kv@127.0.0.1:7000@"+poolModel)
	defer e.close()
	e.publishUntil(func() bool { return testutil.ToFloat64(m.BindUnknown) >= 1 })
	require.Equal(t, 1.0, testutil.ToFloat64(handshakes))
	require.NoError(t, p.Close())
}

// holdNextBindMessage makes the bind loop stop the next message it takes
// off a connection after resolving its topic (bindResolvedHook), until the
// returned release is called; reached is closed once it stopped there.
func holdNextBindMessage(t *testing.T) (reached <-chan struct{}, release func()) {
	r, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := func() { once.Do(func() { close(r); <-proceed }) }
	bindResolvedHook.Store(&h)
	var rel sync.Once
	release = func() { rel.Do(func() { close(proceed) }) }
	t.Cleanup(func() { release(); bindResolvedHook.Store(nil) })
	return r, release
}

// seriesOf counts the series of the pool's per-endpoint counters labelled
// with endpoint id.
func seriesOf(t *testing.T, p *Pool, id string) int {
	t.Helper()
	m := p.metrics()
	n := 0
	for _, v := range []*prometheus.CounterVec{m.MessagesReceived, m.ZMQErrors, m.Reconnections, m.Dropped,
		m.SequenceGaps, m.PublisherRestarts, m.Replays, m.TopicModelUnknown, p.sm.lv.Heartbeats, p.sm.lv.IdentityChanges} {
		ch := make(chan prometheus.Metric, 64)
		go func() { v.Collect(ch); close(ch) }()
		for mt := range ch {
			var d dto.Metric
			require.NoError(t, mt.Write(&d))
			for _, l := range d.GetLabel() {
				if l.GetName() == "pod_identifier" && l.GetValue() == id {
					n++
				}
			}
		}
	}
	return n
}

// A configured endpoint the selector leaves out has its messages counted
// as dropped (reason not_selected) under its ID. Removing it deletes that
// series, and a message the bind loop took off the socket before the
// removal and counts after it does not bring the series back: it is
// resolved again and counted as an unknown topic. Before, the removal of
// an endpoint without a stream deleted nothing, and the late message
// recreated the series (one per removed endpoint, across churn).
func TestBindRemovedNotSelectedEndpointLeavesNoSeries(t *testing.T) {
	defer leakcheck.Check(t)()
	p, _ := newSelectingPool(t, PoolConfig{BindAddress: "127.0.0.1:0"}, newPoolIndex(t), "role=decode")
	defer p.Close()
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	const prefill = "127.0.0.1:8002"
	require.NoError(t, p.Ensure(Endpoint{ID: prefill, Labels: map[string]string{"role": "prefill"}}))
	m := p.metrics()
	e := dialEngine(t, p.bindAddr(), "kv@"+prefill+"@"+poolModel)
	defer e.close()
	e.publishUntil(func() bool { return counter(m.Dropped, prefill, string(dropNotSelected)) >= 1 })

	reached, release := holdNextBindMessage(t)
	defer release() // before Close
	e.publishN(1)   // taken off the socket and resolved before the removal
	<-reached
	p.Remove(prefill)
	require.Zero(t, seriesOf(t, p, prefill), "the removal deletes the endpoint's series")
	release()
	e.publishUntil(func() bool { return testutil.ToFloat64(m.BindUnknown) >= 2 })
	require.Zero(t, seriesOf(t, p, prefill), "a late message recreated a removed endpoint's series")
	require.NoError(t, p.Close())
}

// The same for an endpoint with a stream: a duplicate message (counted as
// dropped, reason stale_seq) resolved before the endpoint's removal and
// received after it is not counted under the removed endpoint's ID, which
// has no series left.
func TestBindRemovedEndpointLateMessageLeavesNoSeries(t *testing.T) {
	defer leakcheck.Check(t)()
	p, _ := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0"}, newPoolIndex(t))
	defer p.Close()
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	const id = "127.0.0.1:8003"
	require.NoError(t, p.Ensure(Endpoint{ID: id}))
	m := p.metrics()
	e := dialEngine(t, p.bindAddr(), "kv@"+id+"@"+poolModel)
	defer e.close()
	waitApplied(t, p, id, e.publishUntil(received(p, id)))

	reached, release := holdNextBindMessage(t)
	defer release()                       // before Close
	e.send(e.seq-1, poolPayload(e.seq-1)) // a duplicate: dropped as stale_seq when received
	<-reached
	p.Remove(id)
	require.Zero(t, seriesOf(t, p, id), "the removal deletes the endpoint's series")
	release()
	e.publishUntil(func() bool { return testutil.ToFloat64(m.BindUnknown) >= 1 })
	require.Zero(t, seriesOf(t, p, id), "a late message recreated a removed endpoint's series")
	require.NoError(t, p.Close())
}

// With BindAnyTopic, a topic whose endpoint is no endpoint ID (not valid
// UTF-8, longer than a host and port can be, or without a host) creates no
// stream: its ID would label every series of the endpoint. Such messages are
// counted as unknown, and the pool keeps serving the engines.
func TestBindAnyTopicRefusesBadEndpointIDs(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	p, _ := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0", BindAnyTopic: true, BindAnySource: true}, ix)
	defer p.Close()
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	m := p.metrics()
	bad := []string{
		"kv@127.0.0.1:\xff\xfe@" + poolModel,
		"kv@" + strings.Repeat("h", 300) + ":8000@" + poolModel,
		"kv@:8000@" + poolModel,
		"kv@no-port@" + poolModel,
	}
	e := dialEngine(t, p.bindAddr(), bad[0])
	defer e.close()
	for i, topic := range bad {
		e.topic = []byte(topic)
		e.publishUntil(func() bool { return testutil.ToFloat64(m.BindUnknown) >= float64(i+1) })
	}
	require.Empty(t, p.Endpoints())
	require.Zero(t, testutil.CollectAndCount(m.Dropped), "no dropped_total series named after a topic")
	e.topic = []byte("kv@127.0.0.1:7000@" + poolModel)
	e.publishUntil(received(p, "127.0.0.1:7000"))
	require.Equal(t, []string{"127.0.0.1:7000"}, p.Endpoints())
	require.NoError(t, p.Close())
}
