package approx

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// fakeCapacities is a CapacitySource whose answers a test sets.
type fakeCapacities struct {
	mu sync.Mutex
	m  map[string]EngineCapacity
}

func (f *fakeCapacities) EngineCapacity(id string) EngineCapacity {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[id]
}

// restamp marks every engine but except as read at now (their scrapes
// keep succeeding).
func (f *fakeCapacities) restamp(now time.Time, except string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, ec := range f.m {
		if id != except && !ec.Read.IsZero() {
			ec.Read = now
			f.m[id] = ec
		}
	}
}

func (f *fakeCapacities) set(id string, ec EngineCapacity) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[id] = ec
}

func newCapacityTest(t *testing.T, cfg Config) (*Index, *telemetry.Manual, *fakeCapacities, *prometheus.Registry) {
	t.Helper()
	clk := telemetry.NewManual(time.Unix(1_000_000, 0))
	src := &fakeCapacities{m: map[string]EngineCapacity{}}
	reg := prometheus.NewRegistry()
	cfg.Enabled = true
	ix, err := New(cfg, Options{Set: telemetry.Set{Clock: clk, Registerer: reg}, Capacities: src})
	require.NoError(t, err)
	require.NoError(t, ix.Bind(Binding{BlockSize: 16}))
	return ix, clk, src, reg
}

func stateOf(t *testing.T, ix *Index, id string) EndpointState {
	t.Helper()
	for _, e := range ix.Endpoints() {
		if e.ID == id {
			return e
		}
	}
	t.Fatalf("%s unknown", id)
	return EndpointState{}
}

// Each endpoint's capacity is its engine's own, read at each refresh;
// configuration for the endpoint overrides it; without a fresh reading
// the configured capacity applies, counted once per episode by reason.
func TestCapacityFromEngine(t *testing.T) {
	ix, clk, src, reg := newCapacityTest(t, Config{Refresh: time.Second, TTL: time.Minute,
		Endpoints: map[string]Capacity{"pinned": {GPUBlocks: 10, BlockSize: 16}}})
	now := clk.Now()
	src.set("gpu", EngineCapacity{Capacity: Capacity{GPUBlocks: 100, BlockSize: 16}, Read: now})
	src.set("offload", EngineCapacity{Capacity: Capacity{GPUBlocks: 100, CPUBlocks: 300, BlockSize: 16}, Read: now, Offloading: true})
	src.set("pinned", EngineCapacity{Capacity: Capacity{GPUBlocks: 999, BlockSize: 16}, Read: now})
	src.set("unsized", EngineCapacity{Capacity: Capacity{GPUBlocks: 100, BlockSize: 16}, Read: now, Offloading: true})
	src.set("plain", EngineCapacity{Read: now}) // metrics read, no cache configuration
	src.set("bad", EngineCapacity{Read: now, Invalid: true})
	ix.SetEndpoints([]string{"gpu", "offload", "pinned", "unsized", "plain", "bad", "down"})

	def := Capacity{GPUBlocks: DefaultGPUBlocks, BlockSize: DefaultEngineBlockSize}
	for _, tc := range []struct {
		id, source, fallback string
		c                    Capacity
	}{
		{"gpu", CapacityEngine, "", Capacity{GPUBlocks: 100, BlockSize: 16}},
		{"offload", CapacityEngine, "", Capacity{GPUBlocks: 100, CPUBlocks: 300, BlockSize: 16}},
		{"pinned", CapacityConfig, "", Capacity{GPUBlocks: 10, BlockSize: 16}},
		{"unsized", CapacityEngine, FallbackOffloadUnsized, Capacity{GPUBlocks: 100, BlockSize: 16}},
		{"plain", CapacityDefault, FallbackUnreported, def},
		{"bad", CapacityDefault, FallbackInvalid, def},
		{"down", CapacityDefault, FallbackMetricsUnavailable, def},
	} {
		e := stateOf(t, ix, tc.id)
		require.Equal(t, tc.source, e.CapacitySource, tc.id)
		require.Equal(t, tc.fallback, e.CapacityFallback, tc.id)
		require.Equal(t, tc.c, e.EngineCapacity, tc.id)
		require.Equal(t, tc.c.Blocks(16), e.Capacity, tc.id)
	}
	// The LRU is bounded by the engine's capacity: 100 GPU blocks.
	ix.Record("gpu", keys(1, 150))
	require.Equal(t, 100, ix.Entries("gpu"))
	ix.Record("offload", keys(1, 450))
	require.Equal(t, 400, ix.Entries("offload"), "GPU plus CPU-offload blocks")

	for _, r := range fallbackNames {
		require.Equal(t, 1.0, testutil.ToFloat64(ix.met.fallbacks[r]), r)
	}
	// Refreshes in the same state count nothing more.
	clk.Advance(time.Second)
	ix.Current()
	require.Equal(t, 1.0, testutil.ToFloat64(ix.met.fallbacks[FallbackMetricsUnavailable]))

	// "down" comes up: its engine's capacity applies at the next refresh.
	src.set("down", EngineCapacity{Capacity: Capacity{GPUBlocks: 50, BlockSize: 16}, Read: clk.Now()})
	clk.Advance(time.Second)
	ix.Current()
	require.Equal(t, CapacityEngine, stateOf(t, ix, "down").CapacitySource)
	// Its metrics go down again: the capacity it reported is kept for the
	// TTL (every entry sized by it expires by then), then the fallback.
	clk.Advance(30 * time.Second)
	src.restamp(clk.Now(), "down")
	ix.Current()
	require.Equal(t, CapacityEngine, stateOf(t, ix, "down").CapacitySource)
	clk.Advance(31 * time.Second)
	src.restamp(clk.Now(), "down")
	ix.Current()
	e := stateOf(t, ix, "down")
	require.Equal(t, CapacityDefault, e.CapacitySource)
	require.Equal(t, FallbackMetricsUnavailable, e.CapacityFallback)
	require.Equal(t, 2.0, testutil.ToFloat64(ix.met.fallbacks[FallbackMetricsUnavailable]), "a second episode")

	n, err := testutil.GatherAndCount(reg, "kvroute_approx_endpoint_capacity_blocks")
	require.NoError(t, err)
	require.Equal(t, 7, n)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	found := false
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "kvroute_approx_endpoint_capacity_blocks" && len(m.GetLabel()) == 2 &&
				m.GetLabel()[0].GetValue() == "offload" && m.GetLabel()[1].GetValue() == CapacityEngine {
				require.Equal(t, 400.0, m.GetGauge().GetValue())
				found = true
			}
		}
	}
	require.True(t, found)
}

// An engine not read yet gets the configured capacity without a fallback
// counted; once its read fails, the fallback is counted with the failure.
func TestCapacityPendingThenFailed(t *testing.T) {
	ix, clk, src, _ := newCapacityTest(t, Config{})
	src.set("a", EngineCapacity{Pending: true})
	ix.SetEndpoints([]string{"a"})
	e := stateOf(t, ix, "a")
	require.Equal(t, CapacityDefault, e.CapacitySource)
	require.Empty(t, e.CapacityFallback)
	require.Zero(t, testutil.ToFloat64(ix.met.fallbacks[FallbackMetricsUnavailable]))
	src.set("a", EngineCapacity{Failure: "connection"})
	clk.Advance(time.Second)
	ix.Current()
	e = stateOf(t, ix, "a")
	require.Equal(t, FallbackMetricsUnavailable, e.CapacityFallback)
	require.Equal(t, "connection", e.MetricsFailure)
	require.Equal(t, 1.0, testutil.ToFloat64(ix.met.fallbacks[FallbackMetricsUnavailable]))
}

// An engine that offloads without reporting the tier's size takes the
// configured cpuBlocks, converted to its block size.
func TestCapacityConfiguredCPUTier(t *testing.T) {
	ix, clk, src, _ := newCapacityTest(t, Config{Capacity: Capacity{GPUBlocks: 1000, CPUBlocks: 500, BlockSize: 32}})
	src.set("a", EngineCapacity{Capacity: Capacity{GPUBlocks: 100, BlockSize: 16}, Read: clk.Now(), Offloading: true})
	ix.SetEndpoints([]string{"a"})
	e := stateOf(t, ix, "a")
	require.Equal(t, CapacityEngineConfigCPU, e.CapacitySource)
	require.Empty(t, e.CapacityFallback)
	require.Equal(t, Capacity{GPUBlocks: 100, CPUBlocks: 1000, BlockSize: 16}, e.EngineCapacity)
	require.Zero(t, testutil.ToFloat64(ix.met.fallbacks[FallbackOffloadUnsized]))
}

// capacityFrom "config" never asks the engine.
func TestCapacityFromConfig(t *testing.T) {
	ix, clk, src, _ := newCapacityTest(t, Config{CapacityFrom: CapacityFromConfig})
	src.set("a", EngineCapacity{Capacity: Capacity{GPUBlocks: 100, BlockSize: 16}, Read: clk.Now()})
	ix.SetEndpoints([]string{"a", "b"})
	for _, id := range []string{"a", "b"} {
		e := stateOf(t, ix, id)
		require.Equal(t, CapacityDefault, e.CapacitySource)
		require.Empty(t, e.CapacityFallback, "nothing falls back: the engine is not asked")
	}
}
