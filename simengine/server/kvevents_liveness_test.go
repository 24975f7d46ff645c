package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/replay"
	"github.com/kvroute/kvroute/telemetry"
)

const liveWait, liveTick = 30 * time.Second, 5 * time.Millisecond

// snapshotKV is a kv-events-config with replay and snapshots on addrs
// (events, replay, snapshot).
func snapshotKV(t *testing.T, events, replay, snap string) KVEventsConfig {
	t.Helper()
	kv, err := ParseKVEventsConfig(`{"enable_kv_cache_events":true,"endpoint":"` + events +
		`","replay_endpoint":"` + replay + `","snapshot_endpoint":"` + snap + `"}`)
	require.NoError(t, err)
	return kv
}

func startServerOpts(t *testing.T, cfg Config, opts Options) *Server {
	t.Helper()
	cfg.Model = "m"
	sink := cfg.Engine.Sink
	cfg.Engine = fastEngine()
	cfg.Engine.Sink = sink
	s, err := New(cfg, opts)
	require.NoError(t, err)
	require.NoError(t, s.Start("127.0.0.1:0"))
	return s
}

// redialBackoff is the router pool's pause before it re-dials a lost
// subscription (its first: a session that delivered resets the backoff).
const redialBackoff = 100 * time.Millisecond

func routerPool(t *testing.T, clock telemetry.Clock) (*kvevents.Pool, *kvindex.Index, *prometheus.Registry) {
	t.Helper()
	ix, err := kvindex.New(kvindex.Config{BlockSize: fastEngine().BlockSize, SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	reg := prometheus.NewRegistry()
	p, err := kvevents.NewPool(kvevents.PoolConfig{Model: "m", MinBackoff: redialBackoff}, ix,
		kvevents.Options{Set: telemetry.Set{Registerer: reg, Clock: clock, Logger: slog.New(slog.NewTextHandler(tlog{t}, nil))}})
	require.NoError(t, err)
	return p, ix, reg
}

// With snapshots on, every batch of the simulated engine carries its
// 16-byte publisher identity in vLLM's newest layout (the array batch's
// fourth element), the snapshot replies carry the same identity, and an
// idle engine publishes an empty batch after HeartbeatEvery that takes the
// next sequence number. Without snapshots there is neither, as in vLLM.
func TestPublisherIdentityAndHeartbeatOnTheWire(t *testing.T) {
	defer leakcheck.Check(t)()
	clock := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	kv := snapshotKV(t, "tcp://127.0.0.1:0", "tcp://127.0.0.1:0", "tcp://127.0.0.1:0")
	s := startServerOpts(t, Config{KVEvents: kv}, Options{Clock: clock})
	defer func() { require.NoError(t, s.Close()) }()
	id, ok := s.Publisher().PublisherID()
	require.True(t, ok)
	require.NotEqual(t, [16]byte{}, id)

	code, out := post(t, "http://"+s.Addr()+"/v1/completions", map[string]any{"prompt": []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, "max_tokens": 1})
	require.Equal(t, http.StatusOK, code, string(out))
	require.Eventually(t, func() bool { return s.Publisher().Stats().Published > 0 }, liveWait, liveTick)
	busy := s.Publisher().Stats().Published
	clock.Advance(HeartbeatEvery)
	require.Eventually(t, func() bool { return s.Publisher().Heartbeats() == 1 }, liveWait, liveTick)
	require.Equal(t, busy+1, s.Publisher().Stats().Published, "a heartbeat takes a sequence number")

	dec := wire.NewDecoder(wire.Limits{})
	raw := replayRaw(t, s.ReplayEndpoint())
	require.Len(t, raw, int(busy+1), "every batch, heartbeat included, is buffered for replay")
	for i, p := range raw {
		var b wire.Batch
		require.NoError(t, dec.Decode(p, &b))
		require.True(t, b.HasPublisherID, "batch %d", i)
		require.Equal(t, id, b.PublisherID)
		h, err := wire.PeekHeader(p)
		require.NoError(t, err)
		require.Equal(t, id, h.PublisherID)
		if i == len(raw)-1 {
			require.Empty(t, b.Events, "the heartbeat is an empty batch")
			require.Equal(t, float64(clock.Now().UnixNano())/1e9, b.TS)
		}
	}

	// Without a snapshot_endpoint: no identity, no heartbeat.
	plain, err := ParseKVEventsConfig(`{"enable_kv_cache_events":true,"endpoint":"tcp://127.0.0.1:0"}`)
	require.NoError(t, err)
	s2 := startServerOpts(t, Config{KVEvents: plain}, Options{Clock: clock})
	defer func() { require.NoError(t, s2.Close()) }()
	_, ok = s2.Publisher().PublisherID()
	require.False(t, ok)
	clock.Advance(10 * HeartbeatEvery)
	require.Zero(t, s2.Publisher().Heartbeats())
}

// An idle simulated engine with snapshots on stays live on the router well
// past events.publisherSilence (3 s): its heartbeats keep it heard. The
// router and the engine share a Manual clock, moved a second at a time
// once the router has heard the heartbeat of the second before, so no
// wall-clock timing is involved.
func TestIdleEngineStaysLiveOnTheRouter(t *testing.T) {
	defer leakcheck.Check(t)()
	start := time.Unix(1_800_000_000, 0)
	clock := telemetry.NewManual(start)
	kv := snapshotKV(t, "tcp://127.0.0.1:0", "tcp://127.0.0.1:0", "tcp://127.0.0.1:0")
	s := startServerOpts(t, Config{KVEvents: kv}, Options{Clock: clock})
	defer func() { require.NoError(t, s.Close()) }()
	p, _, _ := routerPool(t, clock)
	defer func() { require.NoError(t, p.Close()) }()
	ep := s.Addr()
	require.NoError(t, p.Ensure(kvevents.Endpoint{ID: ep, EventsAddress: s.KVEventsEndpoint()}))
	require.Eventually(t, func() bool { return s.Publisher().Stats().Subscribed == 1 }, liveWait, liveTick)

	for i := 1; i <= 8; i++ { // 8 s idle, past publisherSilence 3 s
		clock.Advance(HeartbeatEvery)
		now := clock.Now()
		require.Eventually(t, func() bool {
			st, _ := p.Status(ep)
			return st.LastHeard.Equal(now)
		}, liveWait, liveTick, "heartbeat %d not heard", i)
		st, _ := p.Status(ep)
		require.True(t, st.Heartbeats, "the router watches the publisher")
		require.False(t, st.Silent, "second %d", i)
		require.NotEqual(t, kvevents.StateDegraded, st.State, "second %d: %+v", i, st)
		id, _ := s.Publisher().PublisherID()
		require.Equal(t, id, st.PublisherID)
	}
	st, _ := p.Status(ep)
	require.Equal(t, kvevents.StateLive, st.State)
	require.Equal(t, uint64(8), s.Publisher().Heartbeats())
}

// A restarted simulated engine (a new one on the same ports) has a new
// publisher identity, and the router sees the restart from it alone: the
// endpoint has no replay socket (so no reconnect digest check), and the
// new engine has published past the old watermark before the router
// re-dials (so the sequence does not go backwards). The router clears the
// old lifetime's blocks once and indexes the new one's. The router runs on
// a Manual clock, so it re-dials only when the test moves it on. The ports
// lie outside the ephemeral range (testport), so no other socket takes
// them while neither engine listens.
func TestEngineRestartDetectedByIdentity(t *testing.T) {
	defer leakcheck.Check(t)()
	engineClock := telemetry.NewManual(time.Unix(1_800_000_000, 0)) // no heartbeats unless moved
	kv := snapshotKV(t, "tcp://"+testport.Addr(t), "tcp://"+testport.Addr(t), "tcp://"+testport.Addr(t))
	a := startServerOpts(t, Config{KVEvents: kv}, Options{Clock: engineClock})
	events, replay, snap := a.KVEventsEndpoint(), a.ReplayEndpoint(), a.SnapshotEndpoint()
	routerClock := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	p, ix, reg := routerPool(t, routerClock)
	defer func() { require.NoError(t, p.Close()) }()
	const ep = "127.0.0.1:1"
	require.NoError(t, p.Ensure(kvevents.Endpoint{ID: ep, EventsAddress: events}))
	require.Eventually(t, func() bool { return a.Publisher().Stats().Subscribed == 1 }, liveWait, liveTick)

	promptA := []int{11, 12, 13, 14, 15, 16, 17, 18, 19}
	complete(t, a, promptA)
	idA, _ := a.Publisher().PublisherID()
	require.Eventually(t, func() bool {
		st, _ := p.Status(ep)
		return st.HasPublisherID && st.PublisherID == idA && held(ix, ep, promptA) == 2
	}, liveWait, liveTick)
	watermark := a.Publisher().Stats().Published - 1
	require.NoError(t, a.Close())
	require.Eventually(t, func() bool { st, _ := p.Status(ep); return !st.Connected }, liveWait, liveTick)

	b := startServerOpts(t, Config{KVEvents: snapshotKV(t, events, replay, snap)}, Options{Clock: engineClock})
	defer func() { require.NoError(t, b.Close()) }()
	idB, _ := b.Publisher().PublisherID()
	require.NotEqual(t, idA, idB, "a restarted engine draws a new identity")
	for b.Publisher().Stats().Published <= watermark+2 { // heartbeats nobody receives
		n := b.Publisher().Heartbeats()
		engineClock.Advance(HeartbeatEvery)
		require.Eventually(t, func() bool { return b.Publisher().Heartbeats() > n }, liveWait, liveTick)
	}
	// The subscriber shows the subscription down before it arms the
	// re-dial backoff on its clock: moving the clock in between would start
	// the backoff after the move, and the router would never re-dial.
	require.Eventually(t, func() bool { return routerClock.Armed(routerClock.Now().Add(redialBackoff)) }, liveWait, liveTick,
		"the re-dial backoff is armed")
	routerClock.Advance(redialBackoff)
	require.Eventually(t, func() bool { return b.Publisher().Stats().Subscribed == 1 }, liveWait, liveTick)
	promptB := []int{21, 22, 23, 24, 25, 26, 27, 28, 29}
	complete(t, b, promptB)
	require.Eventually(t, func() bool {
		st, _ := p.Status(ep)
		return st.PublisherID == idB && held(ix, ep, promptB) == 2
	}, liveWait, liveTick)
	require.Zero(t, held(ix, ep, promptA), "the old lifetime's blocks are cleared")
	require.Equal(t, 1.0, counterOf(t, reg, "kvroute_kv_events_publisher_identity_changes_total"))
	require.Equal(t, 1.0, counterOf(t, reg, "kvroute_kv_events_publisher_restarts_total"), "one restart")
}

func complete(t *testing.T, s *Server, prompt []int) {
	t.Helper()
	code, out := post(t, "http://"+s.Addr()+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 1})
	require.Equal(t, http.StatusOK, code, string(out))
}

// held is how many leading blocks of prompt endpoint holds in ix.
func held(ix *kvindex.Index, endpoint string, prompt []int) int {
	toks := make([]uint32, len(prompt))
	for i, v := range prompt {
		toks[i] = uint32(v)
	}
	keys := kvindex.Keys(nil, toks, fastEngine().BlockSize, &kvindex.KeyParams{Model: "m"})
	var res kvindex.MatchResult
	ix.Match(keys, []string{endpoint}, &res)
	return res.Endpoints()[0].Blocks
}

func counterOf(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// replayRaw fetches every buffered payload from the replay socket.
func replayRaw(t *testing.T, addr string) [][]byte {
	t.Helper()
	c, err := replay.NewClient(replay.ClientConfig{Timeout: 10 * time.Second}, replay.Options{})
	require.NoError(t, err)
	var out [][]byte
	_, err = c.Replay(context.Background(), addr, 0, func(_ uint64, payload []byte) error {
		out = append(out, append([]byte(nil), payload...))
		return nil
	})
	require.NoError(t, err)
	return out
}

// tlog writes a router's logs to the test's log.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// firstTimerFired is a clock whose Now moves a heartbeat interval at each
// call and whose first timer has fired before NewTimer returns; its other
// timers are the Manual clock's (never moved). The heartbeat goroutine it
// drives publishes at once, synchronized with nothing its creator did
// after starting it, as a wall-clock heartbeat on a loaded machine can.
type firstTimerFired struct {
	*telemetry.Manual
	mu    sync.Mutex
	now   time.Time
	fired bool
}

func (c *firstTimerFired) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(HeartbeatEvery)
	return c.now
}

func (c *firstTimerFired) NewTimer(d time.Duration) telemetry.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fired {
		return c.Manual.NewTimer(d)
	}
	c.fired = true
	return &firedTimer{ch: make(chan time.Time, 1), first: c.now}
}

// firedTimer has fired once; Reset and Stop do nothing more.
type firedTimer struct {
	ch    chan time.Time
	first time.Time
	once  sync.Once
}

func (t *firedTimer) C() <-chan time.Time {
	t.once.Do(func() { t.ch <- t.first })
	return t.ch
}
func (t *firedTimer) Stop() bool                 { return false }
func (t *firedTimer) Reset(d time.Duration) bool { return false }

// The heartbeat goroutine reads the publisher's liveness state; a
// heartbeat that fires before NewEventPublisher has returned (a loaded
// machine, the wall clock) must find it set up, not race its assignment
// (go test -race reports the race whatever the order).
func TestHeartbeatAtOnceDoesNotRaceThePublishersSetUp(t *testing.T) {
	defer leakcheck.Check(t)()
	clock := &firstTimerFired{Manual: telemetry.NewManual(time.Unix(1_800_000_000, 0)), now: time.Unix(1_800_000_000, 0)}
	kv := snapshotKV(t, "tcp://127.0.0.1:0", "tcp://127.0.0.1:0", "tcp://127.0.0.1:0")
	p, err := NewEventPublisher(kv, wire.FormatVLLM, Options{Clock: clock})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	require.Eventually(t, func() bool { return p.Heartbeats() == 1 }, liveWait, liveTick)
	id, ok := p.PublisherID()
	require.True(t, ok)
	require.NotEqual(t, [16]byte{}, id)
}
