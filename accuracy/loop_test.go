package accuracy

import (
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/syncbuf"
	"github.com/kvroute/kvroute/telemetry"
)

const (
	blockSize = 64
	ep        = "10.0.0.1:8000"
)

func newLoop(t *testing.T, cfg Config, resync func(string) error) (*Loop, *prometheus.Registry, *syncbuf.Buffer) {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := &syncbuf.Buffer{}
	l, err := New(cfg, blockSize, Options{Set: telemetry.Set{Registerer: reg, Logger: slog.New(slog.NewTextHandler(logs, nil))}, Resync: resync})
	require.NoError(t, err)
	return l, reg, logs
}

// series returns the value of the metric name's series for endpoint (a
// counter or gauge), and whether it exists.
func series(t *testing.T, reg *prometheus.Registry, name, endpoint string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "endpoint" && lp.GetValue() == endpoint {
					if c := m.GetCounter(); c != nil {
						return c.GetValue(), true
					}
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

func value(t *testing.T, reg *prometheus.Registry, name, endpoint string) float64 {
	t.Helper()
	v, _ := series(t, reg, name, endpoint)
	return v
}

// observe runs one request through the loop: Begin at the pick, End with
// the engine's answer.
func observe(l *Loop, p Prediction, actual int) Observation {
	l.Begin()
	o, _ := l.End(p, actual, true)
	return o
}

func TestExactPredictionReadsZeroError(t *testing.T) {
	l, reg, _ := newLoop(t, Config{}, nil)
	l.Begin()
	require.EqualValues(t, 1, l.Pending())
	// vLLM computes the last prompt token, so it reuses at most 4 blocks of a 5-block prompt.
	o, ok := l.End(Prediction{Endpoint: ep, PromptTokens: 320, CachedTokens: 320}, 256, true)
	require.True(t, ok)
	require.Zero(t, l.Pending())
	require.Equal(t, Observation{Endpoint: ep, Predicted: 256, Actual: 256, Error: 0}, o)
	require.Equal(t, 1.0, value(t, reg, "kvroute_router_prediction_observed_total", ep))
	require.Equal(t, 0.0, value(t, reg, "kvroute_router_prediction_stale_total", ep))
	require.Equal(t, 0.0, value(t, reg, "kvroute_router_prediction_missing_total", ep))
	require.Equal(t, 256.0, value(t, reg, "kvroute_router_observed_cached_tokens_total", ep))
	require.Equal(t, 256.0, value(t, reg, "kvroute_router_observed_predicted_tokens_total", ep))
	require.Equal(t, 1, testutil.CollectAndCount(reg, "kvroute_router_prediction_error_tokens"))
}

// An end without the engine's answer only ends the prediction.
func TestEndWithoutAnswerObservesNothing(t *testing.T) {
	l, reg, _ := newLoop(t, Config{}, nil)
	l.Begin()
	_, ok := l.End(Prediction{Endpoint: ep, PromptTokens: 128, CachedTokens: 64}, 0, false)
	require.False(t, ok)
	require.Zero(t, l.Pending())
	_, present := series(t, reg, "kvroute_router_prediction_observed_total", ep)
	require.False(t, present)
}

// A host's prediction of a negative number of cached tokens (Prediction is
// the loop's public input) is read as a prediction of none: it must not
// reach the predicted-token counter, which panics on a negative addition,
// on the goroutine that ends the request.
func TestNegativePredictionCountsAsNone(t *testing.T) {
	l, reg, _ := newLoop(t, Config{}, nil)
	var o Observation
	require.NotPanics(t, func() { o = observe(l, Prediction{Endpoint: ep, PromptTokens: 128, CachedTokens: -64}, 32) })
	require.Equal(t, Observation{Endpoint: ep, Predicted: 0, Actual: 32, Error: -32}, o)
	require.Zero(t, value(t, reg, "kvroute_router_observed_predicted_tokens_total", ep))
	require.Equal(t, 1.0, value(t, reg, "kvroute_router_prediction_missing_total", ep))
}

func TestCountsStaleAndMissing(t *testing.T) {
	l, reg, _ := newLoop(t, Config{}, nil)
	o := observe(l, Prediction{Endpoint: ep, PromptTokens: 256, CachedTokens: 256}, 0) // the engine evicted what the index still holds
	require.Equal(t, 192, o.Error)
	o = observe(l, Prediction{Endpoint: ep, PromptTokens: 256}, 128) // the engine holds what the index never heard of
	require.Equal(t, -128, o.Error)
	require.Equal(t, 1.0, value(t, reg, "kvroute_router_prediction_stale_total", ep))
	require.Equal(t, 1.0, value(t, reg, "kvroute_router_prediction_missing_total", ep))

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
	var mu sync.Mutex
	var resynced []string
	l, reg, logs := newLoop(t, Config{Window: 4, MissRatio: 0.5, Resync: true}, func(id string) error {
		mu.Lock()
		defer mu.Unlock()
		resynced = append(resynced, id)
		if len(resynced) > 1 {
			return errors.New("boom")
		}
		return nil
	})
	p := Prediction{Endpoint: ep, PromptTokens: 256, CachedTokens: 256}
	observe(l, p, 192) // hit
	observe(l, p, 0)
	observe(l, p, 0)
	require.False(t, l.Inaccurate(ep), "the window is not full yet")
	observe(l, p, 0) // 3 of 4 missed
	require.True(t, l.Inaccurate(ep))
	require.Equal(t, 1.0, value(t, reg, "kvroute_router_endpoint_inaccurate", ep))
	require.Contains(t, logs.String(), "miss persistently")
	require.Equal(t, []string{ep}, resynced)
	require.Equal(t, 1.0, testutil.ToFloat64(l.met.resyncs.WithLabelValues(ep, "requested")))

	for range 3 {
		observe(l, p, 192) // 1 of 4 missed: at most half the ratio
	}
	require.False(t, l.Inaccurate(ep))
	require.Equal(t, 0.0, value(t, reg, "kvroute_router_endpoint_inaccurate", ep))
	require.Contains(t, logs.String(), "accurate again")
	for range 4 {
		observe(l, p, 0)
	}
	require.True(t, l.Inaccurate(ep))
	require.Len(t, resynced, 1, "a second resync waits ResyncInterval")
}

// Without Config.Resync the loop never asks for a replay.
func TestResyncOffNeverReplays(t *testing.T) {
	called := false
	l, _, _ := newLoop(t, Config{Window: 1}, func(string) error { called = true; return nil })
	observe(l, Prediction{Endpoint: ep, PromptTokens: 256, CachedTokens: 256}, 0)
	require.True(t, l.Inaccurate(ep))
	require.False(t, called)
}

func TestRemoveDropsWindowAndSeries(t *testing.T) {
	l, reg, _ := newLoop(t, Config{Window: 1}, nil)
	observe(l, Prediction{Endpoint: ep, PromptTokens: 128, CachedTokens: 64}, 0)
	require.True(t, l.Inaccurate(ep))
	_, present := series(t, reg, "kvroute_router_prediction_observed_total", ep)
	require.True(t, present)
	l.Remove(ep)
	require.False(t, l.Inaccurate(ep))
	_, present = series(t, reg, "kvroute_router_prediction_observed_total", ep)
	require.False(t, present, "a removed endpoint's series are deleted")
}

func TestConfigValidation(t *testing.T) {
	for _, bad := range []Config{{Window: -1}, {Window: 10_001}, {MissRatio: 1.5}, {MissRatio: -0.1},
		{ToleranceTokens: -1}, {ResyncInterval: -1}} {
		require.Error(t, bad.Validate(), "%+v", bad)
		_, err := New(bad, blockSize, Options{})
		require.Error(t, err, "%+v", bad)
	}
	require.NoError(t, Config{}.Validate())
	_, err := New(Config{}, 0, Options{})
	require.Error(t, err, "a block size is required")
	d := Config{}.withDefaults()
	require.Equal(t, Config{Window: DefaultWindow, MissRatio: DefaultMissRatio, ResyncInterval: DefaultResyncInterval}, d)
}

func TestRegistrationConflictIsAnError(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := New(Config{}, blockSize, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	_, err = New(Config{}, blockSize, Options{Set: telemetry.Set{Registerer: reg}})
	require.Error(t, err)
}

// An endpoint that becomes inaccurate again within ResyncInterval of its
// last resync gets its resync once the interval has passed, at its next
// observed request while its misses persist: the interval delays the
// replay, it does not drop it, or the endpoint would stay inaccurate, its
// events never replayed, for as long as it lives.
func TestSuppressedResyncIsAskedForOnceTheIntervalPasses(t *testing.T) {
	var mu sync.Mutex
	var resynced []string
	clk := telemetry.NewManual(time.Unix(1_000_000, 0))
	l, err := New(Config{Window: 2, MissRatio: 0.5, Resync: true, ResyncInterval: time.Minute}, blockSize,
		Options{Set: telemetry.Set{Clock: clk}, Resync: func(id string) error {
			mu.Lock()
			defer mu.Unlock()
			resynced = append(resynced, id)
			return nil
		}})
	require.NoError(t, err)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(resynced) }
	miss := Prediction{Endpoint: ep, PromptTokens: 256, CachedTokens: 256}
	for range 2 {
		observe(l, miss, 0)
	}
	require.True(t, l.Inaccurate(ep))
	require.Equal(t, 1, count())
	for range 2 {
		observe(l, miss, 192) // hits: accurate again
	}
	require.False(t, l.Inaccurate(ep))
	for range 2 {
		observe(l, miss, 0) // inaccurate again within the interval
	}
	require.True(t, l.Inaccurate(ep))
	require.Equal(t, 1, count(), "the second resync waits ResyncInterval")

	clk.Advance(time.Minute)
	observe(l, miss, 0)
	require.True(t, l.Inaccurate(ep))
	require.Equal(t, 2, count(), "once the interval has passed, the endpoint still missing gets its resync")
	clk.Advance(time.Minute)
	observe(l, miss, 0)
	require.Equal(t, 2, count(), "one resync per time the endpoint became inaccurate")
}
