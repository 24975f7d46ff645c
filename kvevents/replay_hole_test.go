package kvevents

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/zmqpub"
	"github.com/kvroute/kvroute/internal/zmqx"
	"github.com/kvroute/kvroute/replay"
)

// stateGauge reads kvroute_kv_events_stream_state{pod_identifier=id,
// state=want} from a NewStateCollector registered on a fresh registry.
func stateGauge(t *testing.T, p *Pool, id string, want StreamState) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(NewStateCollector(p, nil)))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "kvroute_kv_events_stream_state" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["pod_identifier"] == id && labels["state"] == string(want) {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no stream_state series for %s %s", id, want)
	return 0
}

// An idle engine with 5,000 buffered batches whose replay socket drops
// replies past vLLM's ROUTER send high-water mark (1,000): the connect
// replay arrives with holes, asks again from the first missing sequence,
// and ends with all 5,000 batches applied and the endpoint live. Before, the
// replay stopped at the first hole: about 1,000 were applied, the endpoint
// went live, and the rest never came.
func TestPoolConnectReplayThroughDroppingReplaySocketEndsExact(t *testing.T) {
	defer leakcheck.Check(t)()
	const n = 5000
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: "127.0.0.1:8000", Model: poolModel,
		ReplayAddr: "127.0.0.1:0", ReplaySendHWM: 1000})
	defer pub.Close()
	last := publishN(t, pub, n) // before the router starts; then idle
	p, logs := newTestPool(t, PoolConfig{ReplayClient: replay.ClientConfig{IdleTimeout: 500 * time.Millisecond}}, ix)
	defer p.Close()
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint(), ReplayAddress: pub.ReplayEndpoint()}))
	waitAppliedLogs(t, p, id, last, logs)
	require.Eventually(t, func() bool { return stateOf(p, id) == StateLive }, poolWait, poolTick, logs.String())
	requireHeldLogs(t, ix, id, 0, last, logs)
	st, _ := p.Status(id)
	require.Equal(t, uint64(n), st.Messages, "each of the 5,000 batches applied once, none missing")
	dropped := pub.ReplayStats().Dropped
	require.Positive(t, dropped, "the replay socket dropped replies past its HWM")
	// The drops show as holes, or, when they took an attempt's tail and its
	// END, as an attempt without END: either way counted and asked again.
	require.Positive(t, counter(p.metrics().ZMQErrors, id, replay.OpHole)+counter(p.metrics().ZMQErrors, id, replay.OpIncomplete),
		"the dropped replies are counted")
	require.Equal(t, 1.0, counter(p.metrics().Replays, id, replayComplete))
	t.Logf("%d buffered batches, %d replies dropped by the replay socket, %v holes: all applied",
		n, dropped, counter(p.metrics().ZMQErrors, id, replay.OpHole))
}

// startHoleyRouter is a replay socket for endpoint id holding batches
// 0..end-1: while holey is set, every answer leaves out the sequence right
// after the one asked for (a publisher dropping past its send high-water
// mark, made certain); once it is cleared, answers are whole.
func startHoleyRouter(t *testing.T, id string, end uint64, holey *atomic.Bool) (addr string, stop func()) {
	l, err := zmqx.Listen(context.Background(), "127.0.0.1:0", zmq4.Router, zmqx.Options{}, nil)
	require.NoError(t, err)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []*zmqx.Conn
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					m, err := c.ReadMsg()
					if err != nil {
						return
					}
					if m.Command || len(m.Frames) != 2 {
						continue
					}
					start := binary.BigEndian.Uint64(m.Frames[1])
					skip := holey.Load()
					topic := []byte("kv@" + id + "@" + poolModel)
					for s := start; s < end; s++ {
						if skip && s == start+1 {
							continue
						}
						if c.WriteMsg([]byte{}, topic, binary.BigEndian.AppendUint64(nil, s), poolPayload(s)) != nil {
							return
						}
					}
					_ = c.WriteMsg([]byte{}, []byte{}, binary.BigEndian.AppendUint64(nil, 1<<64-1), []byte{})
				}
			}()
		}
	}()
	return l.Endpoint(), func() {
		_ = l.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
}

// A replay that gives up with sequences it knows were published still
// missing leaves the endpoint degraded — in its status, its stream_state
// metric and so readiness — never live, although the engine is idle; a
// repair once per ReplayCooldown fills the hole when the publisher answers
// whole again, and the endpoint goes live. Before, the endpoint went live
// with the hole open for good. The replay socket leaves a hole in every
// answer until the test has seen the endpoint degraded, so the test does not
// depend on how fast a send queue drains.
func TestPoolReplayHoleDegradedUntilRepaired(t *testing.T) {
	defer leakcheck.Check(t)()
	const n = 5000
	const id = "127.0.0.1:8000"
	ix := newPoolIndex(t)
	pub := newTestPublisher(t, zmqpub.Config{Endpoint: id, Model: poolModel})
	defer pub.Close()
	last := uint64(n - 1)
	var holey atomic.Bool
	holey.Store(true)
	replayAddr, stop := startHoleyRouter(t, id, n, &holey)
	defer stop()
	p, logs := newTestPool(t, PoolConfig{ReplayCooldown: time.Second, TailProbeDelay: -1,
		ReplayClient: replay.ClientConfig{IdleTimeout: 500 * time.Millisecond, MaxHoleRetries: 1}}, ix)
	defer p.Close()
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: pub.Endpoint(), ReplayAddress: replayAddr}))
	// While every answer has a hole the endpoint is never live, and it is
	// degraded (status, metric) between a failed replay and the next repair.
	require.Eventually(t, func() bool {
		st, _ := p.Status(id)
		require.False(t, st.State == StateLive, "live with a hole: %+v\n%s", st, logs)
		return st.State == StateDegraded && st.Degraded && stateGauge(t, p, id, StateDegraded) == 1
	}, poolWait, poolTick, logs.String())
	require.Positive(t, counter(p.metrics().Replays, id, replayFailed), "the first replay gave up")
	// The drops show as holes, or, when they took an attempt's tail and its
	// END, as an attempt without END: either way counted and asked again.
	require.Positive(t, counter(p.metrics().ZMQErrors, id, replay.OpHole)+counter(p.metrics().ZMQErrors, id, replay.OpIncomplete),
		"the dropped replies are counted")
	holey.Store(false)
	require.Eventually(t, func() bool {
		st, _ := p.Status(id)
		return st.State == StateLive && st.Applied == last
	}, poolWait, poolTick, logs.String())
	require.Contains(t, logs.String(), "Repairing a replay that ended with sequences missing")
	requireHeldLogs(t, ix, id, 0, last, logs)
}
