package kvroute

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvevents/publish"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

// Two engines publish over real ZeroMQ sockets: one under the router's
// model, one under a served-model alias. The alias is reported for that
// endpoint alone (gauge, mismatches, one warning); routing by the
// router's model still works for both; removing the endpoint drops its
// series.
func TestRouterReportsTopicModelMismatchPerEndpoint(t *testing.T) {
	defer leakcheck.Check(t)()
	send := func(pub *publish.Publisher, base uint64, tokens []uint32) {
		hashes := make([]uint64, len(tokens)/64)
		for i := range hashes {
			hashes[i] = base + uint64(i)
		}
		_, err := pub.PublishBatch(&wire.Batch{TS: 1, Events: []wire.Event{{
			Type: wire.EventBlockStored, BlockHashes: hashes, TokenIDs: tokens, BlockSize: 64,
			Medium: "GPU", Group: 0, HasGroup: true, Kind: "full_attention",
		}}})
		require.NoError(t, err)
	}
	eps := loopbackEndpoints(t, 2)
	good, err := publish.New(publish.Config{Addr: "tcp://127.0.0.1:0", Endpoint: eps[0].ID, Model: testModel}, publish.Options{})
	require.NoError(t, err)
	defer good.Close()
	alias, err := publish.New(publish.Config{Addr: "tcp://127.0.0.1:0", Endpoint: eps[1].ID, Model: "qwen-alias"}, publish.Options{})
	require.NoError(t, err)
	defer alias.Close()
	eps[0].EventsAddress, eps[1].EventsAddress = good.Endpoint(), alias.Endpoint()

	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	cfg := DefaultConfig()
	cfg.Model = testModel
	cfg.DisableRender = true
	cfg.Speculative.Enabled = new(false)
	cfg.Events.Replay = new(false)
	r, err := New(context.Background(), cfg, Options{Set: telemetry.Set{Registerer: reg, Logger: slog.New(slog.NewTextHandler(logs, nil))}})
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.SetEndpoints(eps))

	pa, pb := prompt(31, 64*4), prompt(32, 64*4)
	for i, c := range []struct {
		pub *publish.Publisher
		p   []uint32
	}{{good, pa}, {alias, pb}} {
		require.Eventually(t, func() bool {
			send(c.pub, uint64(1000*(i+1)), c.p)
			d, err := r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: c.p}}}, eps)
			require.NoError(t, err)
			d.Done(DoneInfo{})
			return d.CachedTokens == len(c.p) && d.Endpoint.ID == eps[i].ID
		}, 10*time.Second, 20*time.Millisecond, "engine %d's events never reached the index", i)
	}
	gauge := func(id string) (float64, bool) { return gathered(t, reg, "kvroute_router_endpoint_model_mismatch", id) }
	require.Equal(t, []modelMismatch{{Endpoint: eps[1].ID, TopicModel: "qwen-alias"}}, r.models.mismatches())
	v, ok := gauge(eps[1].ID)
	require.True(t, ok)
	require.Equal(t, 1.0, v)
	v, ok = gauge(eps[0].ID)
	require.True(t, ok)
	require.Zero(t, v)
	require.Equal(t, 1, logs.count("topicModel=qwen-alias"), "warned once for the endpoint, not per message")

	require.NoError(t, r.SetEndpoints(eps[:1]))
	require.Empty(t, r.models.mismatches())
	_, ok = gauge(eps[1].ID)
	require.False(t, ok, "a removed endpoint's series is gone")
}

func TestModelCheckIgnoresUnknownEndpointsAndEmptyTopics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newModelCheck("m", reg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	m.setKnown(map[string]Endpoint{"a": {ID: "a"}})
	m.observe("a", "")         // vLLM's default empty topic: nothing to compare
	m.observe("stranger", "x") // bind mode: an endpoint the router was not given
	require.Empty(t, m.mismatches())
	long := make([]byte, 1000)
	for i := range long {
		long[i] = 'x'
	}
	m.observe("a", string(long))
	require.Len(t, m.mismatches()[0].TopicModel, maxTopicModelBytes)
	m.observe("a", "m") // the engine now publishes under the router's model
	require.Empty(t, m.mismatches())
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, mfs, 1)
	require.Len(t, mfs[0].GetMetric(), 1, "no series for the stranger")
}

// An endpoint's mismatch follows the models SetEndpoints gives it, at
// once, not only at the engine's next topic: an endpoint whose Models come
// to list its topic's model (the models poller answered after the events
// began) no longer mismatches, and one whose Models stop listing it does.
func TestModelCheckFollowsTheEndpointsModels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newModelCheck("m", reg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	gauge := func(id string) float64 {
		v, ok := gathered(t, reg, "kvroute_router_endpoint_model_mismatch", id)
		require.True(t, ok)
		return v
	}
	m.setKnown(map[string]Endpoint{"a": {ID: "a"}, "b": {ID: "b", Models: []string{"m", "qwen"}}})
	m.observe("a", "qwen")
	m.observe("b", "qwen")
	require.Equal(t, []modelMismatch{{Endpoint: "a", TopicModel: "qwen"}}, m.mismatches())
	require.Equal(t, 1.0, gauge("a"))
	require.Zero(t, gauge("b"))

	m.setKnown(map[string]Endpoint{"a": {ID: "a", Models: []string{"m", "qwen"}}, "b": {ID: "b"}})
	require.Equal(t, []modelMismatch{{Endpoint: "b", TopicModel: "qwen"}}, m.mismatches())
	require.Zero(t, gauge("a"), "a now serves its topic's model")
	require.Equal(t, 1.0, gauge("b"), "b no longer serves its topic's model")
}

// A topic model longer than the bytes kept of it (maxTopicModelBytes) that
// the endpoint serves stays served when SetEndpoints checks it again: the
// check compares the whole name the topic named, not its cut, so that an
// endpoint serving a long model name (a path, say) is not reported
// mismatched at every SetEndpoints and back at every topic. One that
// differs only past the cut still mismatches.
func TestModelCheckRecheckComparesALongTopicModelWhole(t *testing.T) {
	long := strings.Repeat("m", maxTopicModelBytes+44)
	reg := prometheus.NewRegistry()
	m, err := newModelCheck(long, reg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	gauge := func(id string) float64 {
		v, ok := gathered(t, reg, "kvroute_router_endpoint_model_mismatch", id)
		require.True(t, ok)
		return v
	}
	other := long[:maxTopicModelBytes] + strings.Repeat("x", 44)
	eps := map[string]Endpoint{"base": {ID: "base"}, "listed": {ID: "listed", Models: []string{"qwen", other}}, "stranger": {ID: "stranger"}}
	m.setKnown(eps)
	m.observe("base", long)
	m.observe("listed", other)
	m.observe("stranger", other)
	require.Equal(t, []modelMismatch{{Endpoint: "stranger", TopicModel: other[:maxTopicModelBytes]}}, m.mismatches())

	m.setKnown(eps)
	require.Equal(t, []modelMismatch{{Endpoint: "stranger", TopicModel: other[:maxTopicModelBytes]}}, m.mismatches())
	require.Zero(t, gauge("base"), "base serves the router's long model")
	require.Zero(t, gauge("listed"), "listed lists its topic's long model")
	require.Equal(t, 1.0, gauge("stranger"))

	eps["listed"] = Endpoint{ID: "listed", Models: []string{long}} // the same first bytes, another name
	m.setKnown(eps)
	require.Equal(t, 1.0, gauge("listed"), "a name agreeing with the topic's only up to the cut is another")
}
