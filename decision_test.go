package kvroute

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/accuracy"
	"github.com/kvroute/kvroute/internal/syncbuf"
	"github.com/kvroute/kvroute/render"
	"github.com/kvroute/kvroute/telemetry"
)

func accRouter(t *testing.T, mutate func(*Config)) (*Router, *prometheus.Registry, *syncbuf.Buffer) {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := &syncbuf.Buffer{}
	r := testRouter(t, mutate, Options{Set: telemetry.Set{Registerer: reg, Logger: slog.New(slog.NewTextHandler(logs, nil))}})
	return r, reg, logs
}

func series(t *testing.T, reg *prometheus.Registry, name, ep string) float64 {
	t.Helper()
	v, _ := gathered(t, reg, name, ep)
	return v
}

// cached is the DoneInfo of a successful request whose engine reported n
// cached prompt tokens.
func cached(n int) DoneInfo { return DoneInfo{CachedTokens: n, HasCachedTokens: true} }

func TestDoneWithCachedTokensClosesTheLoop(t *testing.T) {
	r, reg, _ := accRouter(t, nil)
	eps := endpoints(2)
	p := prompt(1, 320) // 5 blocks
	engineStores(t, r.Index(), eps[0].ID, p, 1)
	d := pick(t, r, p, eps)
	require.Equal(t, 320, d.CachedTokens)
	require.EqualValues(t, 1, r.acc.Pending())
	// vLLM computes the last prompt token, so it reuses at most 4 blocks of a 5-block prompt.
	o, ok := d.Done(cached(256))
	require.True(t, ok)
	require.Equal(t, accuracy.Observation{Endpoint: eps[0].ID, Predicted: 256, Actual: 256, Error: 0}, o)
	require.Zero(t, r.acc.Pending())
	_, ok = d.Done(cached(0))
	require.False(t, ok, "one Done ends the request")
	require.Equal(t, 1.0, series(t, reg, "kvroute_router_prediction_observed_total", eps[0].ID))
	require.Equal(t, 256.0, series(t, reg, "kvroute_router_observed_cached_tokens_total", eps[0].ID))
	require.Zero(t, series(t, reg, "kvroute_router_prediction_stale_total", eps[0].ID))

	// Without the engine's answer the request ends and nothing is observed.
	d = pick(t, r, p, eps)
	_, ok = d.Done(DoneInfo{})
	require.False(t, ok)
	_, ok = d.Done(cached(256))
	require.False(t, ok, "a later Done's cached tokens do not count")
	require.Equal(t, 1.0, series(t, reg, "kvroute_router_prediction_observed_total", eps[0].ID))
	require.Zero(t, r.acc.Pending())
}

// The decode pick of a split request (Request.RemotePrefill) carries no
// prediction: its engine reads the prompt's KV cache from the prefiller and
// reports the transferred prompt as cached, which says nothing of what the
// index predicted it held. Compared, every such request counted a missing
// miss, and the decoder was marked inaccurate and resynced (its index
// entries cleared) over and over.
func TestRemotePrefillDecisionFeedsNoPrediction(t *testing.T) {
	r, reg, _ := accRouter(t, func(c *Config) {
		c.Accuracy = accuracy.Config{Window: 1}
	})
	eps := endpoints(1)
	id := eps[0].ID
	p := prompt(1, 320)
	for range 2 {
		d, err := r.Pick(context.Background(), &Request{Prompts: []render.Prompt{{TokenIDs: p}}, RemotePrefill: true}, eps)
		require.NoError(t, err)
		require.Zero(t, r.acc.Pending())
		_, ok := d.Done(cached(256)) // the transferred prompt, reported as cached
		require.False(t, ok, "a remote-prefill decision is not compared")
	}
	require.False(t, r.EndpointInaccurate(id))
	_, present := gathered(t, reg, "kvroute_router_prediction_observed_total", id)
	require.False(t, present)
	require.Zero(t, r.acc.Pending())
}

func TestPersistentMissesMarkTheEndpoint(t *testing.T) {
	r, reg, logs := accRouter(t, func(c *Config) {
		c.Speculative.Enabled = new(false)
		c.Accuracy = accuracy.Config{Window: 4, MissRatio: 0.5}
	})
	eps := endpoints(1)
	id := eps[0].ID
	p := prompt(1, 256)
	engineStores(t, r.Index(), id, p, 1)
	for range 3 {
		pick(t, r, p, eps).Done(cached(0))
	}
	require.False(t, r.EndpointInaccurate(id), "the window is not full yet")
	pick(t, r, p, eps).Done(cached(0))
	require.True(t, r.EndpointInaccurate(id))
	require.Equal(t, 1.0, series(t, reg, "kvroute_router_endpoint_inaccurate", id))
	require.Contains(t, logs.String(), "miss persistently")
}

func TestDecisionByRequestID(t *testing.T) {
	r, reg, _ := accRouter(t, nil)
	eps := endpoints(2)
	p := prompt(3, 192)
	engineStores(t, r.Index(), eps[1].ID, p, 1)
	req := &Request{ID: "req-1", Prompts: []render.Prompt{{TokenIDs: p}}}
	_, err := r.Pick(context.Background(), req, eps)
	require.NoError(t, err)
	d := r.Decision("req-1")
	require.NotNil(t, d)
	o, ok := d.Done(cached(128))
	require.True(t, ok)
	require.Equal(t, 0, o.Error)
	require.Nil(t, r.Decision("req-1"), "Done unfiled it")
	_, ok = r.Decision("req-1").Done(cached(128))
	require.False(t, ok, "nil-safe")
	require.Nil(t, r.Decision("nope"))
	v, _ := gathered(t, reg, "kvroute_tokenload_request_ids_total", "unknown")
	require.Equal(t, 3.0, v)
	require.Zero(t, r.Requests().Len())
	require.Zero(t, r.acc.Pending())
}

func TestDoneWithoutPredictionAndRemovedEndpoint(t *testing.T) {
	r, reg, _ := accRouter(t, func(c *Config) { c.DisableRender = true })
	eps := endpoints(2)
	require.NoError(t, r.SetEndpoints(eps))
	d, err := r.Pick(context.Background(), &Request{API: render.APICompletions}, eps) // rendering disabled: no prediction
	require.NoError(t, err)
	require.Zero(t, r.acc.Pending())
	_, ok := d.Done(cached(64))
	require.False(t, ok)
	require.Zero(t, r.acc.Pending())

	// A Decision the host built itself carries no prediction either.
	_, ok = (&Decision{Endpoint: eps[0]}).Done(cached(64))
	require.False(t, ok)

	d = pick(t, r, prompt(1, 128), eps[:1])
	_, ok = d.Done(cached(0))
	require.True(t, ok)
	_, present := gathered(t, reg, "kvroute_router_prediction_observed_total", eps[0].ID)
	require.True(t, present)
	require.NoError(t, r.SetEndpoints(eps[1:]))
	_, present = gathered(t, reg, "kvroute_router_prediction_observed_total", eps[0].ID)
	require.False(t, present, "a removed endpoint's series are deleted")
}

func TestAccuracyConfigValidation(t *testing.T) {
	for _, bad := range []accuracy.Config{{Window: -1}, {MissRatio: 1.5}, {ToleranceTokens: -1}, {ResyncInterval: -1}} {
		cfg := DefaultConfig()
		cfg.Model = testModel
		cfg.Accuracy = bad
		require.ErrorIs(t, cfg.Validate(), ErrInvalidConfig, "%+v", bad)
	}
	cfg, err := LoadConfig(bytes.NewReader([]byte(`{"model":"m","accuracy":{"window":8,"resync":true,"resyncInterval":"30s"},"readiness":{"giveUpAfter":"90s"}}`)))
	require.NoError(t, err)
	require.Equal(t, 8, cfg.Accuracy.Window)
	require.True(t, cfg.Accuracy.Resync)
	require.Equal(t, 30*time.Second, cfg.Accuracy.ResyncInterval, "duration strings")
	require.Equal(t, 90*time.Second, cfg.Readiness.GiveUpAfter)
	_, err = LoadConfig(bytes.NewReader([]byte(`{"model":"m","accuracy":{"resyncInterval":30}}`)))
	require.Error(t, err, "a bare number is not a duration")
}
