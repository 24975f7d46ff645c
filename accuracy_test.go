package kvroute

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func accRouter(t *testing.T, mutate func(*Config)) (*Router, *prometheus.Registry, *syncBuffer) {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := &syncBuffer{}
	r := testRouter(t, mutate, Options{Registerer: reg, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return r, reg, logs
}

func series(t *testing.T, reg *prometheus.Registry, name, ep string) float64 {
	t.Helper()
	v, _ := gathered(t, reg, name, ep)
	return v
}

func TestObserveExactPredictionReadsZeroError(t *testing.T) {
	r, reg, _ := accRouter(t, nil)
	eps := endpoints(2)
	p := prompt(1, 320) // 5 blocks
	engineStores(t, r.Index(), eps[0].ID, p, 1)
	d := pick(t, r, p, eps)
	require.Equal(t, 320, d.CachedTokens)
	// vLLM computes the last prompt token, so it reuses at most 4 blocks of a 5-block prompt.
	o, ok := d.Observe(256)
	require.True(t, ok)
	require.Equal(t, Observation{Endpoint: eps[0].ID, Predicted: 256, Actual: 256, Error: 0}, o)
	_, ok = d.Observe(0)
	require.False(t, ok, "a decision is observed once")
	d.Done(nil)
	require.Equal(t, 1.0, series(t, reg, "kvroute_router_prediction_observed_total", eps[0].ID))
	require.Equal(t, 0.0, series(t, reg, "kvroute_router_prediction_stale_total", eps[0].ID))
	require.Equal(t, 0.0, series(t, reg, "kvroute_router_prediction_missing_total", eps[0].ID))
	require.Equal(t, 256.0, series(t, reg, "kvroute_router_observed_cached_tokens_total", eps[0].ID))
	require.Equal(t, 256.0, series(t, reg, "kvroute_router_observed_predicted_tokens_total", eps[0].ID))
	require.Equal(t, 1, testutil.CollectAndCount(reg, "kvroute_router_prediction_error_tokens"))
}

func TestObserveCountsStaleAndMissing(t *testing.T) {
	r, reg, _ := accRouter(t, func(c *Config) { c.Speculative.Enabled = false })
	eps := endpoints(1)
	warm := prompt(1, 256)
	engineStores(t, r.Index(), eps[0].ID, warm, 1)

	d := pick(t, r, warm, eps)
	o, ok := d.Observe(0) // the engine evicted what the index still holds
	require.True(t, ok)
	require.Equal(t, 192, o.Error)
	cold := prompt(2, 256)
	d2 := pick(t, r, cold, eps)
	o, _ = d2.Observe(128) // the engine holds what the index never heard of
	require.Equal(t, -128, o.Error)
	require.Equal(t, 1.0, series(t, reg, "kvroute_router_prediction_stale_total", eps[0].ID))
	require.Equal(t, 1.0, series(t, reg, "kvroute_router_prediction_missing_total", eps[0].ID))

	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "kvroute_router_prediction_error_tokens" {
			h := mf.GetMetric()[0].GetHistogram()
			require.EqualValues(t, 2, h.GetSampleCount())
			require.Equal(t, 64.0, h.GetSampleSum())
		}
	}
}

func TestPersistentMissesRaiseLogAndResyncOnceThenClear(t *testing.T) {
	r, reg, logs := accRouter(t, func(c *Config) {
		c.Speculative.Enabled = false
		c.Accuracy = AccuracyConfig{Window: 4, MissRatio: 0.5, Resync: true}
	})
	var mu sync.Mutex
	var resynced []string
	r.acc.resync = func(id string) error {
		mu.Lock()
		defer mu.Unlock()
		resynced = append(resynced, id)
		if len(resynced) > 1 {
			return errors.New("boom")
		}
		return nil
	}
	eps := endpoints(1)
	id := eps[0].ID
	p := prompt(1, 256)
	engineStores(t, r.Index(), id, p, 1)
	observe := func(actual int) {
		d := pick(t, r, p, eps)
		d.Observe(actual)
		d.Done(nil)
	}
	observe(192) // hit
	observe(0)
	observe(0)
	require.False(t, r.EndpointInaccurate(id), "the window is not full yet")
	observe(0) // 3 of 4 missed
	require.True(t, r.EndpointInaccurate(id))
	require.Equal(t, 1.0, series(t, reg, "kvroute_router_endpoint_inaccurate", id))
	require.Contains(t, logs.String(), "miss persistently")
	require.Equal(t, []string{id}, resynced)
	require.Equal(t, 1.0, testutil.ToFloat64(r.acc.resyncs.WithLabelValues(id, "requested")))

	for range 3 {
		observe(192) // 1 of 4 missed: at most half the ratio
	}
	require.False(t, r.EndpointInaccurate(id))
	require.Equal(t, 0.0, series(t, reg, "kvroute_router_endpoint_inaccurate", id))
	require.Contains(t, logs.String(), "accurate again")
	for range 4 {
		observe(0)
	}
	require.True(t, r.EndpointInaccurate(id))
	require.Len(t, resynced, 1, "a second resync waits ResyncInterval")
}

func TestObserveByRequestID(t *testing.T) {
	r, reg, _ := accRouter(t, nil)
	eps := endpoints(2)
	p := prompt(3, 192)
	engineStores(t, r.Index(), eps[1].ID, p, 1)
	req := &Request{ID: "req-1", Prompts: []Prompt{{TokenIDs: p}}}
	_, err := r.Pick(context.Background(), req, eps)
	require.NoError(t, err)
	o, ok := r.Observe("req-1", 128)
	require.True(t, ok)
	require.Equal(t, 0, o.Error)
	_, ok = r.Observe("req-1", 128)
	require.False(t, ok, "observed once")
	require.True(t, r.Done("req-1"))
	_, ok = r.Observe("nope", 0)
	require.False(t, ok)
	require.Equal(t, 2.0, series(t, reg, "kvroute_router_prediction_unknown_total", ""))

	// Done before Observe: the ID is forgotten.
	req.ID = "req-2"
	_, err = r.Pick(context.Background(), req, eps)
	require.NoError(t, err)
	require.True(t, r.Done("req-2"))
	_, ok = r.Observe("req-2", 0)
	require.False(t, ok)
	require.Empty(t, r.acc.pending)
}

func TestObserveWithoutPredictionAndRemovedEndpoint(t *testing.T) {
	r, reg, _ := accRouter(t, func(c *Config) { c.DisableRender = true })
	eps := endpoints(2)
	require.NoError(t, r.SetEndpoints(eps))
	d, err := r.Pick(context.Background(), &Request{API: APICompletions}, eps) // rendering disabled: no prediction
	require.NoError(t, err)
	_, ok := d.Observe(64)
	require.False(t, ok)

	d = pick(t, r, prompt(1, 128), eps[:1])
	_, ok = d.Observe(0)
	require.True(t, ok)
	_, present := gathered(t, reg, "kvroute_router_prediction_observed_total", eps[0].ID)
	require.True(t, present)
	require.NoError(t, r.SetEndpoints(eps[1:]))
	_, present = gathered(t, reg, "kvroute_router_prediction_observed_total", eps[0].ID)
	require.False(t, present, "a removed endpoint's series are deleted")
}

func TestAccuracyConfigValidation(t *testing.T) {
	for _, bad := range []AccuracyConfig{{Window: -1}, {MissRatio: 1.5}, {ToleranceTokens: -1}, {ResyncInterval: -1}} {
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
