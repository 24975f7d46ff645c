package kvevents

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// impostorSeq is where an impostor's batches start: their blocks are
// distinct from every batch the engines of these tests publish.
const impostorSeq = 500

// An impostor connected from another address (127.0.0.2) keeps sending a
// victim engine's topic from sequence 0 while the engine restarts. Without
// the source check the first connection to deliver the topic after the
// engine's connection ended took the stream, the impostor's blocks replaced
// the engine's and the restarted engine's messages were dropped as
// foreign. Now the impostor is refused and counted throughout, and the
// restarted engine's messages are applied.
func TestBindImpostorCannotTakeOverRestartingEngine(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0"}, ix)
	defer p.Close()
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	const victim = "127.0.0.1:8300"
	require.NoError(t, p.Ensure(Endpoint{ID: victim}))
	topic := "kv@" + victim + "@" + poolModel
	engine := dialEngineFrom(t, p.bindAddr(), topic, "127.0.0.1")
	defer engine.close()
	first := engine.publishUntil(received(p, victim))
	last := engine.publishN(10)
	waitAppliedLogs(t, p, victim, last, logs)

	m := p.metrics()
	mismatches := func() float64 { return testutil.ToFloat64(m.BindSourceMismatch) }
	impostor := dialEngineFrom(t, p.bindAddr(), topic, "127.0.0.2")
	defer impostor.close()
	attack := func() { // a restart's sequence 0 with the impostor's blocks
		impostor.send(0, poolPayload(impostorSeq))
	}
	require.Eventually(t, func() bool {
		attack()
		return mismatches()+testutil.ToFloat64(m.BindForeign) >= 1
	}, poolWait, 20*time.Millisecond)

	// The engine restarts: its connection ends (counted as lost) while the
	// impostor goes on.
	engine.close()
	require.Eventually(t, func() bool { attack(); return counter(m.ZMQErrors, victim, "recv") >= 1 },
		poolWait, 20*time.Millisecond, "%+v\n%s", statusOf(p, victim), logs)
	refused := mismatches()
	require.Eventually(t, func() bool {
		attack()
		return mismatches() >= refused+5 || heldBlocks(ix, victim, impostorSeq) > 0
	}, poolWait, 20*time.Millisecond)
	require.Zero(t, heldBlocks(ix, victim, impostorSeq), "the impostor took the endpoint over: %+v", statusOf(p, victim))
	require.Zero(t, counter(m.PublisherRestarts, victim), "the impostor's sequence 0 cleared the endpoint")
	require.False(t, statusOf(p, victim).Connected, "the impostor owns the endpoint")
	require.Contains(t, logs.String(), "KV-event topic refused")
	requireHeldLogs(t, ix, victim, first, last, logs)

	// The restarted engine (same address, sequences from 0) takes over while
	// the impostor keeps sending.
	restarted := dialEngineFrom(t, p.bindAddr(), topic, "127.0.0.1")
	defer restarted.close()
	restarted.seq = 0
	restarted.publishUntil(func() bool { attack(); return counter(m.PublisherRestarts, victim) >= 1 })
	for range 130 {
		restarted.publishN(1)
		attack()
	}
	lastR := restarted.seq - 1
	waitAppliedLogs(t, p, victim, lastR, logs)
	requireHeldLogs(t, ix, victim, lastR-129, lastR, logs)
	require.Zero(t, heldBlocks(ix, victim, impostorSeq), "an impostor's block was indexed")
	require.Zero(t, testutil.ToFloat64(m.BindForeign), "the impostor never owned the stream")
	// The impostor's connection is read on its own: its refusals may still be
	// on their way when the engine's last message has been applied.
	require.Eventually(t, func() bool { return mismatches() > refused+130 }, poolWait, poolTick,
		"refused %v of the impostor's messages, want more than %v", mismatches(), refused+130)
	require.True(t, statusOf(p, victim).Connected)
	require.NoError(t, p.Close())
}

// With BindAnyTopic an impostor cannot create streams for endpoints on
// other hosts either, and topics that are not indexed at all stay counted
// as unknown whatever their source.
func TestBindSourceCheckedBeforeStreamCreation(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	p, _ := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0", BindAnyTopic: true}, ix)
	defer p.Close()
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	m := p.metrics()
	e := dialEngineFrom(t, p.bindAddr(), "kv@127.0.0.1:8500@"+poolModel, "127.0.0.2")
	defer e.close()
	e.publishUntil(func() bool { return testutil.ToFloat64(m.BindSourceMismatch) >= 1 })
	e.topic = []byte("kv@127.0.0.2:8500@" + poolModel) // its own address: accepted
	e.publishUntil(received(p, "127.0.0.2:8500"))
	require.Equal(t, []string{"127.0.0.2:8500"}, p.Endpoints())
	require.Zero(t, testutil.ToFloat64(m.BindUnknown))
	require.NoError(t, p.Close())
}

// Known endpoints only (the default): a topic naming no endpoint passed to
// Ensure is counted as unknown, not as a refused claim, whatever its source.
func TestBindUnknownTopicFromElsewhereIsUnknown(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	p, _ := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0"}, ix)
	defer p.Close()
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	m := p.metrics()
	e := dialEngineFrom(t, p.bindAddr(), "kv@127.0.0.1:8501@"+poolModel, "127.0.0.2")
	defer e.close()
	e.publishUntil(func() bool { return testutil.ToFloat64(m.BindUnknown) >= 1 })
	require.Zero(t, testutil.ToFloat64(m.BindSourceMismatch))
	require.NoError(t, p.Close())
}

// An engine behind NAT or a proxy connects from an address that is not its
// endpoint's: refused and warned about by default, indexed with the
// operator's opt-out, bindAnySource.
func TestBindAnySourceOptOut(t *testing.T) {
	defer leakcheck.Check(t)()
	const id = "127.0.0.1:8600"
	topic := "kv@" + id + "@" + poolModel
	for _, anySource := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "bindAnySource"}[anySource], func(t *testing.T) {
			ix := newPoolIndex(t)
			p, logs := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0", BindAnySource: anySource}, ix)
			defer p.Close()
			require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
			require.NoError(t, p.Ensure(Endpoint{ID: id}))
			m := p.metrics()
			natted := dialEngineFrom(t, p.bindAddr(), topic, "127.0.0.3")
			defer natted.close()
			if anySource {
				last := natted.publishUntil(received(p, id))
				waitAppliedLogs(t, p, id, last, logs)
				require.Equal(t, poolBlocks, heldBlocks(ix, id, last))
				require.True(t, statusOf(p, id).Connected)
				require.Zero(t, testutil.ToFloat64(m.BindSourceMismatch))
			} else {
				last := natted.publishUntil(func() bool { return testutil.ToFloat64(m.BindSourceMismatch) >= 3 })
				require.Zero(t, heldBlocks(ix, id, last))
				require.False(t, statusOf(p, id).Received)
				require.Equal(t, 1, logs.count("KV-event topic refused"), "warned once per connection: %s", logs)
				require.Contains(t, logs.String(), "remote=127.0.0.3")
			}
			require.NoError(t, p.Close())
		})
	}

	cfg, err := LoadPoolConfig(strings.NewReader(`{"bindAddress": "tcp://*:5557", "bindAnySource": true}`))
	require.NoError(t, err)
	require.True(t, cfg.BindAnySource)
	_, err = LoadPoolConfig(strings.NewReader(`{"bindAddress": "tcp://*:5557", "bindAnySources": true}`))
	require.ErrorContains(t, err, "bindAnySources")
}

func TestSourceMatches(t *testing.T) {
	ip := netip.MustParseAddr
	for _, c := range []struct {
		id   string
		from netip.Addr
		want bool
	}{
		{"10.0.0.5:8000", ip("10.0.0.5"), true},
		{"10.0.0.5:8000", ip("10.0.0.6"), false},
		{"[::ffff:10.0.0.5]:8000", ip("10.0.0.5"), true}, // IPv4-mapped ID
		{"[fd00::5]:8000", ip("fd00::5"), true},
		{"[fe80::5%eth0]:8000", ip("fe80::5"), true}, // zones are not compared
		{"[fd00::5]:8000", ip("fd00::6"), false},
		{"engine-0.svc:8000", ip("10.0.0.5"), false}, // not an IP: matches nothing
		{"10.0.0.5", ip("10.0.0.5"), false},          // not host:port
		{"10.0.0.5:8000", netip.Addr{}, false},
	} {
		require.Equal(t, c.want, sourceMatches(c.id, c.from), "%s from %v", c.id, c.from)
	}
	require.Equal(t, ip("10.0.0.5"), remoteIP(&net.TCPAddr{IP: net.ParseIP("10.0.0.5")}), "IPv4 unmapped")
	require.Equal(t, ip("fe80::5"), remoteIP(&net.TCPAddr{IP: net.ParseIP("fe80::5"), Zone: "eth0"}))
	require.False(t, remoteIP(&net.UnixAddr{}).IsValid())
}

// One peer (127.0.0.9) opens as many connections to the bind socket as it
// serves, completes each handshake and then says nothing. Before, those
// connections held every slot and an engine connecting afterwards was
// closed at once, for as long as the peer kept them. Now one source address
// holds at most a quarter of the slots (the rest are refused and counted
// as accept errors), and the engine is served.
func TestBindOnePeerCannotTakeEveryConnectionSlot(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	p, _ := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0", BindMaxStreams: 1, HeartbeatInterval: -1, IdleTimeout: -1}, ix)
	defer p.Close()
	require.Eventually(t, func() bool { return p.bindAddr() != "" }, poolWait, poolTick)
	b := p.src.(*binder)
	served := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.conns
	}
	accepts := p.metrics().ZMQErrors.WithLabelValues("127.0.0.1:0", "accept")

	const id = "127.0.0.1:7000"
	require.NoError(t, p.Ensure(Endpoint{ID: id}))
	hog := make([]*enginePub, b.maxConns())
	for i := range hog {
		hog[i] = dialEngineFrom(t, p.bindAddr(), "kv@127.0.0.9:7000@"+poolModel, "127.0.0.9")
		defer hog[i].close()
	}
	require.Eventually(t, func() bool { return served()+int(testutil.ToFloat64(accepts)) == len(hog) }, poolWait, poolTick,
		"every connection of the peer was served or refused")

	engine := dialEngineFrom(t, p.bindAddr(), "kv@"+id+"@"+poolModel, "127.0.0.1")
	defer engine.close()
	engine.publishUntil(received(p, id))
	require.Equal(t, b.maxConnsPerSource()+1, served())
	require.Equal(t, float64(len(hog)-b.maxConnsPerSource()), testutil.ToFloat64(accepts))

	for _, h := range hog {
		h.close()
	}
	require.Eventually(t, func() bool { return served() == 1 }, poolWait, poolTick, "the peer's slots are released")
	require.NoError(t, p.Close())
}

// A connection's topic cache is bounded in bytes, not only in entries: a
// peer sending maxConnTopics distinct topics of a frame's size each made
// one connection hold maxConnTopics × MaxFrameSize of them.
func TestBindTopicCacheBoundedInBytes(t *testing.T) {
	defer leakcheck.Check(t)()
	ix := newPoolIndex(t)
	p, _ := newTestPool(t, PoolConfig{BindAddress: "127.0.0.1:0"}, ix)
	defer p.Close()
	b := p.src.(*binder)
	bc := &bindConn{from: netip.MustParseAddr("127.0.0.1"), cache: make(map[string]bindEntry)}
	const topicBytes = 256 << 10
	for i := range maxConnTopics {
		topic := []byte("kv@127.0.0.1:" + strconv.Itoa(9000+i) + "@" + strings.Repeat("m", topicBytes))
		require.Nil(t, b.resolve(bc, topic).st)
		cached := 0
		for k := range bc.cache {
			cached += len(k)
		}
		require.LessOrEqual(t, cached, maxConnTopicBytes+len(topic), "after %d topics", i+1)
	}
	require.NoError(t, p.Close())
}
