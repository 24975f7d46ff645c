package kvroute

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/checkpoint"
	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/testport"
	"github.com/kvroute/kvroute/kvevents"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/simengine"
	"github.com/kvroute/kvroute/simengine/server"
	"github.com/kvroute/kvroute/telemetry"
)

const (
	fleetBS      = 16
	fleetSysLen  = 8 * fleetBS // a shared system prompt of 8 blocks
	fleetSystems = 3
	fleetWait    = 30 * time.Second
)

// fleetEngine is one simulated vLLM (no HTTP: requests are submitted to its
// engine directly) with KV events and a replay buffer of bufferSteps
// batches on loopback ports outside the ephemeral range (testport), so that
// it can be restarted in place without another socket taking them.
type fleetEngine struct {
	t        *testing.T
	id       string
	events   string
	replay   string
	buffer   int
	srv      *server.Server
	requests int
}

func startFleetEngine(t *testing.T, id string, buffer int, events, replay string) *fleetEngine {
	t.Helper()
	e := &fleetEngine{t: t, id: id, buffer: buffer, events: events, replay: replay}
	e.start()
	return e
}

func (e *fleetEngine) start() {
	e.t.Helper()
	if e.events == "" {
		e.events, e.replay = "tcp://"+testport.Addr(e.t), "tcp://"+testport.Addr(e.t)
	}
	replay := e.replay
	var err error
	require.Eventually(e.t, func() bool { // the previous lifetime's ports may take a moment to free
		e.srv, err = server.New(server.Config{
			Model: testModel,
			Engine: simengine.Config{BlockSize: fleetBS, NumGPUBlocks: 160, PrefillTokensPerSecond: 1e7,
				DecodeStep: 100 * time.Microsecond},
			KVEvents: server.KVEventsConfig{EnableKVCacheEvents: true, Publisher: "zmq", Endpoint: e.events,
				ReplayEndpoint: &replay, BufferSteps: e.buffer, Topic: "kv@" + e.id + "@" + testModel},
		}, server.Options{})
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "engine %s: %v", e.id, err)
	e.events, e.replay = e.srv.KVEventsEndpoint(), e.srv.ReplayEndpoint()
}

// waitSubscribers waits until n routers' subscriptions reached the
// engine's publisher, so that nothing published next is lost to the
// slow-joiner window.
func (e *fleetEngine) waitSubscribers(n int) {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return e.srv.Publisher().Stats().Subscribed == n },
		fleetWait, 5*time.Millisecond, "engine %s: %d subscribers, want %d", e.id, e.srv.Publisher().Stats().Subscribers, n)
}

func (e *fleetEngine) stop() { require.NoError(e.t, e.srv.Close()) }

func (e *fleetEngine) endpoint() Endpoint {
	return Endpoint{ID: e.id, EventsAddress: e.events, ReplayAddress: e.replay}
}

// published returns the sequence of the last published batch (-1: none).
func (e *fleetEngine) published() int64 { return int64(e.srv.Publisher().Stats().Published) - 1 }

// system returns shared system prompt j.
func system(j int) []uint32 { return prompt(1000+j, fleetSysLen) }

// serve runs n requests one after the other, each a shared system prompt
// followed by a unique user turn, and returns the engine's prefix-cache hit
// rate over them.
func (e *fleetEngine) serve(n int) float64 {
	e.t.Helper()
	var prompts, cached int
	for i := 0; i < n; i++ {
		e.requests++
		p := append(system(e.requests%fleetSystems), prompt(5000+e.requests*7+len(e.id), 2*fleetBS+5)...)
		done := make(chan simengine.Result, 1)
		_, err := e.srv.Engine().Submit(simengine.Request{Prompt: p, MaxTokens: 2, OnDone: func(r simengine.Result) { done <- r }})
		require.NoError(e.t, err)
		select {
		case r := <-done:
			prompts += r.PromptTokens
			cached += r.CachedTokens
		case <-time.After(fleetWait):
			e.t.Fatalf("engine %s: request %d never finished", e.id, i)
		}
	}
	return float64(cached) / float64(prompts)
}

// fleetRouter builds an events-enabled Router over engines (render off:
// the test matches tokens directly).
func fleetRouter(t *testing.T, engines []*fleetEngine, mutate func(*Config)) (*Router, *prometheus.Registry) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.BlockSize = fleetBS
	cfg.DisableRender = true
	cfg.Speculative.Enabled = new(false)
	if mutate != nil {
		mutate(&cfg)
	}
	reg := prometheus.NewRegistry()
	r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Registerer: reg, Logger: slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))}})
	require.NoError(t, err)
	eps := make([]Endpoint, len(engines))
	for i, e := range engines {
		eps[i] = e.endpoint()
	}
	require.NoError(t, r.SetEndpoints(eps))
	return r, reg
}

// caughtUp waits until r applied every batch each engine published.
func caughtUp(t *testing.T, r *Router, engines ...*fleetEngine) {
	t.Helper()
	for _, e := range engines {
		require.Eventually(t, func() bool {
			st, ok := r.Events().Status(e.id)
			if e.published() < 0 {
				return ok && st.Connected && !st.Replaying
			}
			return ok && st.HasApplied && int64(st.Applied) == e.published() && !st.Replaying
		}, fleetWait, 10*time.Millisecond, "router never caught up with %s (published %d)", e.id, e.published())
	}
}

// snapshotOf returns r's index snapshot.
func snapshotOf(t *testing.T, r *Router) []byte {
	t.Helper()
	var b bytes.Buffer
	_, err := r.Index().WriteSnapshot(&b)
	require.NoError(t, err)
	return b.Bytes()
}

// sysBlocks returns, summed over engines and system prompts, the blocks of
// the system prompts r's index holds on each engine.
func sysBlocks(r *Router, engines []*fleetEngine) int {
	n := 0
	for _, e := range engines {
		for j := 0; j < fleetSystems; j++ {
			var m kvindex.MatchResult
			r.Index().Match(kvindex.Keys(nil, system(j), fleetBS, &kvindex.KeyParams{Model: testModel}), []string{e.id}, &m)
			n += m.Endpoints()[0].Blocks
		}
	}
	return n
}

func resumeCount(t *testing.T, reg *prometheus.Registry, endpoint, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "kvroute_kv_events_resumes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["pod_identifier"] == endpoint && got["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Engines warmed far past a small replay buffer with shared system
// prompts; the router restarts. Without a checkpoint the new index misses
// the old prefixes; with the checkpoint, or bootstrapped from a peer, its
// memberships equal (byte for byte, positions included) those of a router
// that never restarted, and the events published while it was down are
// applied exactly once.
func TestRouterRestartOnWarmFleetWithCheckpointOrPeer(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	const buffer = 16
	engines := []*fleetEngine{
		startFleetEngine(t, "127.0.0.1:18101", buffer, "", ""),
		startFleetEngine(t, "127.0.0.1:18102", buffer, "", ""),
	}
	defer func() {
		for _, e := range engines {
			e.stop()
		}
	}()
	ckpt := filepath.Join(t.TempDir(), "index.ckpt")
	ref, _ := fleetRouter(t, engines, nil) // never restarts
	defer ref.Close()
	a, _ := fleetRouter(t, engines, func(c *Config) { c.Checkpoint = checkpoint.Config{Path: ckpt, Interval: -1} })
	for _, e := range engines {
		e.waitSubscribers(2)
		// The first batch joins both routers to the stream (a replay from
		// 0); let that finish before the buffer rolls over.
		e.serve(1)
		caughtUp(t, ref, e)
		caughtUp(t, a, e)
		e.serve(59)
		require.Greater(t, e.published(), int64(3*buffer), "warmed far past the replay buffer")
	}
	caughtUp(t, ref, engines...)
	caughtUp(t, a, engines...)
	full := sysBlocks(ref, engines)
	require.Equal(t, len(engines)*fleetSystems*8, full, "the live router holds every system prompt")
	a.Close() // writes the checkpoint

	for _, e := range engines {
		e.serve(4) // while the router is down: within the replay buffer
	}
	caughtUp(t, ref, engines...)

	// Without a checkpoint: only the replay window is recovered.
	cold, _ := fleetRouter(t, engines, nil)
	caughtUp(t, cold, engines...)
	require.Less(t, sysBlocks(cold, engines), full/2, "a cold restart misses the old prefixes")
	cold.Close()

	// With the checkpoint.
	warm, reg := fleetRouter(t, engines, func(c *Config) { c.Checkpoint = checkpoint.Config{Path: ckpt, Interval: -1} })
	caughtUp(t, warm, engines...)
	for _, e := range engines {
		require.Equal(t, 1.0, resumeCount(t, reg, e.id, kvevents.ResumeOK), "endpoint %s resumed", e.id)
	}
	require.Equal(t, full, sysBlocks(warm, engines))
	requireSameIndex(t, ref, warm)

	// Bootstrapped from a peer (the never-restarted router).
	peer := httptest.NewServer(ref.SnapshotHandler())
	defer peer.Close()
	boot, breg := fleetRouter(t, engines, func(c *Config) { c.Bootstrap = checkpoint.BootstrapConfig{Peers: []string{peer.URL}} })
	for _, e := range engines {
		e.waitSubscribers(3) // the reference, warm and boot
		e.serve(3)           // live traffic after the replica started
	}
	caughtUp(t, boot, engines...)
	caughtUp(t, ref, engines...)
	caughtUp(t, warm, engines...)
	require.Equal(t, 1.0, restores(t, breg, "peer", "loaded"))
	require.True(t, bytes.Equal(snapshotOf(t, ref), snapshotOf(t, boot)), "the bootstrapped replica equals its peer")
	require.True(t, bytes.Equal(snapshotOf(t, ref), snapshotOf(t, warm)), "and stays equal on live traffic")
	boot.Close()
	warm.Close()

	// Down for longer than the replay buffer: the checkpoint's entries are
	// kept (resumed_with_gap) and the system prompts stay indexed.
	for _, e := range engines {
		e.serve(60)
	}
	gap, greg := fleetRouter(t, engines, func(c *Config) { c.Checkpoint = checkpoint.Config{Path: ckpt, Interval: -1} })
	caughtUp(t, gap, engines...)
	for _, e := range engines {
		require.Equal(t, 1.0, resumeCount(t, greg, e.id, kvevents.ResumeWithGap), "endpoint %s", e.id)
	}
	require.Equal(t, full, sysBlocks(gap, engines))
	gap.Close()
}

// An engine restarted while the router was down is cleared and rebuilt
// from its new lifetime; the other resumes; the downtime's events are
// applied exactly once (the result equals a router that watched it all).
func TestRouterResumeRebuildsEngineRestartedWhileDown(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	engines := []*fleetEngine{
		startFleetEngine(t, "127.0.0.1:18201", 1000, "", ""),
		startFleetEngine(t, "127.0.0.1:18202", 1000, "", ""),
	}
	defer func() {
		for _, e := range engines {
			e.stop()
		}
	}()
	ckpt := filepath.Join(t.TempDir(), "index.ckpt")
	ref, _ := fleetRouter(t, engines, nil)
	defer ref.Close()
	a, _ := fleetRouter(t, engines, func(c *Config) { c.Checkpoint = checkpoint.Config{Path: ckpt, Interval: -1} })
	for _, e := range engines {
		e.waitSubscribers(2)
		e.serve(1)
		caughtUp(t, ref, e)
		caughtUp(t, a, e)
		e.serve(29)
	}
	caughtUp(t, a, engines...)
	a.Close()

	// Engine 1 restarts in place (same sockets, sequences from 0).
	restarted := engines[1]
	restarted.stop()
	restarted.start()
	require.Eventually(t, func() bool {
		st, ok := ref.Events().Status(restarted.id)
		return ok && st.Connected && restarted.srv.Publisher().Stats().Subscribed == 1
	}, fleetWait, 10*time.Millisecond, "the reference router reattached")
	for _, e := range engines {
		e.serve(8)
	}
	caughtUp(t, ref, engines...)

	r, reg := fleetRouter(t, engines, func(c *Config) { c.Checkpoint = checkpoint.Config{Path: ckpt, Interval: -1} })
	defer r.Close()
	caughtUp(t, r, engines...)
	require.Equal(t, 1.0, resumeCount(t, reg, engines[0].id, kvevents.ResumeOK))
	require.Equal(t, 1.0, resumeCount(t, reg, restarted.id, kvevents.ResumeRestarted))
	require.True(t, bytes.Equal(snapshotOf(t, ref), snapshotOf(t, r)), "%s", fmt.Sprint(ref.Index().Stats(), r.Index().Stats()))
}

// requireSameIndex checks that two routers' indexes are equal: the same
// snapshot bytes (every endpoint's engine-hash chain in order, every
// membership with tier, group and reference counts, and positions).
func requireSameIndex(t *testing.T, want, got *Router) {
	t.Helper()
	w, g := snapshotOf(t, want), snapshotOf(t, got)
	if bytes.Equal(w, g) {
		return
	}
	describe := func(b []byte) string {
		ix, err := kvindex.New(kvindex.Config{BlockSize: fleetBS, SweepInterval: -1}, kvindex.Options{})
		require.NoError(t, err)
		defer ix.Close()
		info, err := ix.ReadSnapshot(bytes.NewReader(b), kvindex.SnapshotReadOptions{})
		require.NoError(t, err)
		return fmt.Sprintf("%+v", info.Endpoints)
	}
	t.Fatalf("indexes differ:\nwant %s\n got %s", describe(w), describe(g))
}
