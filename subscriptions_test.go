package kvroute

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents/publish"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// TestRouterFollowsEngineEventsOverZeroMQ runs the whole path: an engine's
// BlockStored published on a real PUB socket with a replay server, the
// router's subscriber pool, the index, and Pick choosing the endpoint that
// reported the blocks. Removing the endpoint clears what it reported.
func TestRouterFollowsEngineEventsOverZeroMQ(t *testing.T) {
	defer leakcheck.Check(t)()
	const engineID = "127.0.0.1:18000" // the engine's inference address (nothing listens: no render here)
	pub, err := publish.New(publish.Config{
		Addr: "tcp://127.0.0.1:0", Endpoint: engineID, Model: testModel, ReplayAddr: "tcp://127.0.0.1:0",
	}, publish.Options{})

	require.NoError(t, err)
	defer pub.Close()

	// Publish before the router exists: the proactive replay on connect
	// must recover it.
	shared := prompt(21, 64*8)
	hashes := make([]uint64, 8)
	for i := range hashes {
		hashes[i] = uint64(0xA000 + i)
	}
	_, err = pub.PublishBatch(&wire.Batch{TS: 1, Events: []wire.Event{{
		Type: wire.EventBlockStored, BlockHashes: hashes, TokenIDs: shared, BlockSize: 64,
		Medium: "GPU", Group: 0, HasGroup: true, Kind: "full_attention",
	}}})
	require.NoError(t, err)

	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.DisableRender = true
	cfg.Speculative.Enabled = new(false)
	cfg.Events.EventsPort = portOf(t, pub.Endpoint())
	cfg.Events.ReplayPort = portOf(t, pub.ReplayEndpoint())
	r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Logger: testLogger(t)}})
	require.NoError(t, err)
	defer r.Close()
	eps := []Endpoint{{ID: "127.0.0.2:8000"}, {ID: engineID}, {ID: "127.0.0.3:8000"}}
	require.NoError(t, r.SetEndpoints(eps[1:2]))

	// The engine is idle: the replay on connect alone must bring its cache in.
	require.Eventually(t, func() bool {
		d, err := r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: shared}}}, eps)
		require.NoError(t, err)
		d.Done(DoneInfo{})
		return d.Endpoint.ID == engineID && d.CachedTokens == len(shared)
	}, 10*time.Second, 20*time.Millisecond, "the replayed BlockStored never reached the index")

	// A live removal goes through too.
	_, err = pub.PublishBatch(&wire.Batch{TS: 2, Events: []wire.Event{{
		Type: wire.EventBlockRemoved, BlockHashes: hashes[4:5], Medium: "GPU", Group: 0, HasGroup: true,
	}}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		d, err := r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: shared}}}, eps)
		require.NoError(t, err)
		d.Done(DoneInfo{})
		return d.CachedTokens == 4*64
	}, 10*time.Second, 20*time.Millisecond, "the BlockRemoved never reached the index")

	// Dropping the endpoint unsubscribes it and clears its blocks.
	require.NoError(t, r.SetEndpoints(nil))
	require.Zero(t, r.Index().Stats().Memberships)
}

func portOf(t *testing.T, endpoint string) int {
	t.Helper()
	u := endpoint
	if i := len("tcp://"); len(u) > i && u[:i] == "tcp://" {
		u = u[i:]
	}
	_, p, err := net.SplitHostPort(u)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

// testLogger writes the router's logs to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Config.Events.Selector subscribes only the endpoints whose labels match;
// setting it together with Options.EventSelector is an error, and it
// survives a JSON round trip with the pool's keys inline.
func TestRouterEventsSelector(t *testing.T) {
	defer leakcheck.Check(t)()
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.DisableRender = true
	cfg.Events.Selector = "role=decode, zone in (a,b)"
	r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Logger: testLogger(t)}})
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.SetEndpoints([]Endpoint{
		{ID: "127.0.0.1:1", Labels: map[string]string{"role": "decode", "zone": "a"}},
		{ID: "127.0.0.1:2", Labels: map[string]string{"role": "prefill", "zone": "a"}},
		{ID: "127.0.0.1:3", Labels: map[string]string{"role": "decode", "zone": "c"}},
	}))
	require.Equal(t, []string{"127.0.0.1:1"}, r.events.eventPool().Endpoints())

	_, err = New(context.Background(), cfg, Options{EventSelector: func(map[string]string) bool { return true }})
	require.ErrorContains(t, err, "not both")

	data, err := json.Marshal(cfg.Events)
	require.NoError(t, err)
	var back EventsConfig
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, cfg.Events.Selector, back.Selector)
	require.Equal(t, cfg.Events.Concurrency, back.Concurrency)
	require.True(t, *back.Enabled)
}
