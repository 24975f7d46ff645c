package sim

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/simengine"
)

// TestLMetricScore: new tokens × (in-flight requests + 1).
func TestLMetricScore(t *testing.T) {
	require.Equal(t, 1000.0, lmetricScore(1000, 0, 64, 0))
	require.Equal(t, float64(1000-640)*3, lmetricScore(1000, 10, 64, 2))
	require.Zero(t, lmetricScore(640, 10, 64, 7), "a fully cached prompt costs nothing at any load")
	require.Zero(t, lmetricScore(600, 10, 64, 1), "never negative")
}

// TestLMetricPick: the product trades cache against load — a warm worker
// wins while its load is below the ratio of the cold worker's work to its
// own, and loses above it; equal scores go to the smaller cache.
func TestLMetricPick(t *testing.T) {
	cfg := DefaultConfig(SharedPrefix, 1)
	ids := endpointIDs(2)
	ix, err := kvindex.New(kvindex.Config{BlockSize: 64, SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	now := func() time.Time { return simengine.DefaultStart }
	l := newLMetric(cfg, ids, ix, now, 1)
	defer l.close()
	prompt := randTokens(rand.New(rand.NewPCG(1, 2)), 1024) // 16 blocks
	// Worker 0 was sent the first 12 blocks (768 of 1,024 tokens); the test
	// keeps the side index as it is (no TTL: picks add nothing to it).
	l.ttl = 0
	for _, k := range keysOf(nil, prompt, 64)[:12] {
		l.predicted[approxKey{k, 0}] = now().Add(time.Hour).UnixNano()
	}
	// Cold worker: 1,024 × 1. Warm worker: 256 × (n + 1): below up to n = 2;
	// at n = 3 the scores tie (1,024) and the tie goes to the smaller cache.
	l.cached[0], l.cached[1] = 500, 100
	for n, want := range []int{0, 0, 0, 1, 1} {
		l.inflight[0], l.inflight[1] = n, 0
		got, err := l.pick(&request{arrival: arrival{prompt: prompt}})
		require.NoError(t, err)
		require.Equal(t, want, got, "warm worker with %d in flight", n)
		require.Equal(t, map[bool]int{true: n + 1, false: 1}[got == 0], l.inflight[got], "the pick counts as in flight")
	}
	l.cached[0], l.cached[1] = 100, 500
	l.inflight[0], l.inflight[1] = 3, 0
	got, _ := l.pick(&request{arrival: arrival{prompt: prompt}})
	require.Zero(t, got, "the same tie goes to worker 0 when its cache is the smaller")
	l.done(&request{engine: 0})
	require.Equal(t, 3, l.inflight[0], "done releases the request")
}
