package approx

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

func keys(from, n int) []kvindex.Key {
	out := make([]kvindex.Key, n)
	for i := range out {
		out[i] = kvindex.Key(from + i)
	}
	return out
}

func newTest(t *testing.T, cfg Config, reg prometheus.Registerer) (*Index, *telemetry.Manual) {
	t.Helper()
	clk := telemetry.NewManual(time.Unix(1_000_000, 0))
	ix, err := New(cfg, Options{Set: telemetry.Set{Clock: clk, Registerer: reg}})
	require.NoError(t, err)
	return ix, clk
}

func TestRecordMatchLongestPrefix(t *testing.T) {
	ix, _ := newTest(t, Config{Enabled: true}, nil)
	ix.Record("a", keys(1, 8))
	require.Equal(t, 8, ix.Match("a", keys(1, 8)))
	require.Equal(t, 3, ix.Match("a", append(keys(1, 3), 99, 4)), "the first miss ends the prefix")
	require.Equal(t, 0, ix.Match("b", keys(1, 8)))
	require.Equal(t, 0, ix.Match("a", keys(50, 2)))
	require.Equal(t, 8, ix.Entries("a"))
}

func TestDisabledHoldsNothingAndIsBlind(t *testing.T) {
	ix, _ := newTest(t, Config{}, nil)
	require.NoError(t, ix.Bind(Binding{}))
	ix.SetEndpoints([]string{"a"})
	ix.Record("a", keys(1, 4))
	require.Equal(t, 0, ix.Match("a", keys(1, 4)))
	require.Equal(t, Stats{MaxBytes: DefaultMaxBytes}, ix.Stats())
	require.Equal(t, ModeBlind, ix.Current().Mode("a"))
	require.Equal(t, ModeBlind, ix.Current().Mode("unknown"))
}

func TestTTLExpiresFromLastRouting(t *testing.T) {
	ix, clk := newTest(t, Config{Enabled: true, TTL: time.Minute}, nil)
	ix.Record("a", keys(1, 4))
	clk.Advance(40 * time.Second)
	ix.Record("a", keys(1, 2)) // routed again: the first two blocks live on
	clk.Advance(30 * time.Second)
	require.Equal(t, 2, ix.Match("a", keys(1, 4)), "blocks 3-4 expired 60 s after their last routing")
	clk.Advance(31 * time.Second)
	require.Equal(t, 0, ix.Match("a", keys(1, 4)))
	ix.Record("a", keys(100, 1)) // expiry in Record frees the expired entries
	require.Equal(t, 1, ix.Entries("a"))
}

// The capacity is GPU plus CPU-offload blocks, converted to the router's
// block size: an index sized to GPU memory forgets what the engine still
// serves from CPU memory.
func TestCapacityCountsCPUOffload(t *testing.T) {
	const bs = 64
	gpuOnly := Capacity{GPUBlocks: 64, BlockSize: 16}                 // 1,024 tokens: 16 router blocks
	offload := Capacity{GPUBlocks: 64, CPUBlocks: 192, BlockSize: 16} // 4,096 tokens: 64 router blocks
	require.Equal(t, 16, gpuOnly.Blocks(bs))
	require.Equal(t, 64, offload.Blocks(bs))
	ix, _ := newTest(t, Config{Enabled: true, Endpoints: map[string]Capacity{"gpu": gpuOnly, "offload": offload}}, nil)
	require.NoError(t, ix.Bind(Binding{BlockSize: bs}))
	for p := 0; p < 4; p++ { // four 16-block prompts: 64 blocks routed
		ix.Record("gpu", keys(1000*p, 16))
		ix.Record("offload", keys(1000*p, 16))
	}
	require.Equal(t, 16, ix.Entries("gpu"))
	require.Equal(t, 64, ix.Entries("offload"))
	require.Equal(t, 16, ix.Match("offload", keys(0, 16)), "the first prompt is still served from CPU memory")
	require.Equal(t, 0, ix.Match("gpu", keys(0, 16)))
	require.Equal(t, 16, ix.Match("gpu", keys(3000, 16)))
}

// A capacity is valid up to the bounds enginemetrics reads an engine's
// within (2³¹ blocks of each tier, 2²⁰ tokens a block), where its tokens
// still fit an int64; beyond them Config and SetCapacity refuse it, and
// Tokens saturates instead of wrapping to a one-block index.
func TestCapacityBeyondEngineBoundsIsRefusedNotWrapped(t *testing.T) {
	largest := Capacity{GPUBlocks: 1 << 31, CPUBlocks: 1 << 31, BlockSize: 1 << 20}
	require.NoError(t, Config{Capacity: largest}.Validate())
	require.Equal(t, int64(1)<<52, largest.Tokens())
	require.Equal(t, 1<<46, largest.Blocks(64))
	ix, _ := newTest(t, Config{Enabled: true, Capacity: largest}, nil)
	ix.Record("a", keys(1, 8))
	require.Equal(t, 8, ix.Match("a", keys(1, 8)))

	for _, c := range []Capacity{
		{GPUBlocks: 1<<31 + 1, BlockSize: 16},
		{GPUBlocks: 1, CPUBlocks: 1<<31 + 1},
		{GPUBlocks: 1, BlockSize: 1<<20 + 1},
		{GPUBlocks: 1 << 60, BlockSize: 16},
	} {
		require.ErrorContains(t, Config{Capacity: c}.Validate(), "at most", "%+v", c)
		require.ErrorContains(t, Config{Endpoints: map[string]Capacity{"a": c}}.Validate(), "at most", "%+v", c)
		require.ErrorContains(t, ix.SetCapacity("a", c), "at most", "%+v", c)
	}
	for _, c := range []Capacity{{GPUBlocks: 1 << 60, BlockSize: 16}, {GPUBlocks: math.MaxInt, CPUBlocks: math.MaxInt}, {GPUBlocks: 1 << 40, BlockSize: math.MaxInt}} {
		require.Equal(t, int64(math.MaxInt64), c.Tokens(), "%+v", c)
		require.Equal(t, int(math.MaxInt64/64), c.Blocks(64), "%+v", c)
	}
}

// Under capacity pressure a prompt's last blocks go before its first ones,
// so a shared system prompt outlives the tails that follow it.
func TestEvictsPromptEndsFirst(t *testing.T) {
	ix, clk := newTest(t, Config{Enabled: true, Endpoints: map[string]Capacity{"a": {GPUBlocks: 6, BlockSize: 64}}}, nil)
	require.NoError(t, ix.Bind(Binding{BlockSize: 64}))
	ix.Record("a", keys(1, 4))
	clk.Advance(time.Second)
	ix.Record("a", []kvindex.Key{1, 2, 50, 51}) // same first two blocks, new tail: 6 entries
	clk.Advance(time.Second)
	ix.Record("a", []kvindex.Key{1, 2, 60}) // one over capacity: the oldest tail block (4) goes
	require.Equal(t, 6, ix.Entries("a"))
	require.Equal(t, 3, ix.Match("a", keys(1, 4)))
	require.Equal(t, 4, ix.Match("a", []kvindex.Key{1, 2, 50, 51}))
}

func TestModesFollowLiveness(t *testing.T) {
	var live sync.Map
	isLive := func(id string) bool { _, ok := live.Load(id); return ok }
	ix, clk := newTest(t, Config{Enabled: true, Refresh: time.Second}, nil)
	require.NoError(t, ix.Bind(Binding{Live: isLive}))
	require.ErrorIs(t, ix.Bind(Binding{}), ErrBound)
	ix.SetEndpoints([]string{"a", "b"})
	live.Store("b", true)
	v := ix.Current()
	require.Equal(t, ModeApproximate, v.Mode("a"))
	require.Equal(t, ModeApproximate, v.Mode("b"), "b's liveness is read at the next refresh")
	clk.Advance(time.Second)
	v = ix.Current()
	require.Equal(t, ModePrecise, v.Mode("b"))
	require.False(t, v.AllLive())

	ix.Record("a", keys(1, 4))
	live.Store("a", true) // a's events start flowing
	require.Equal(t, 4, ix.Match("a", keys(1, 4)), "until the next refresh")
	clk.Advance(time.Second)
	v = ix.Current()
	require.Equal(t, ModePrecise, v.Mode("a"))
	require.True(t, v.AllLive())
	require.Equal(t, 0, ix.Entries("a"), "its approximate entries are dropped")
	require.Equal(t, 0, ix.Match("a", keys(1, 4)))
	def := Capacity{GPUBlocks: DefaultGPUBlocks, BlockSize: DefaultEngineBlockSize}
	require.Equal(t, []EndpointState{
		{ID: "a", Mode: ModePrecise, Capacity: 7812, EngineCapacity: def, CapacitySource: CapacityDefault},
		{ID: "b", Mode: ModePrecise, Capacity: 7812, EngineCapacity: def, CapacitySource: CapacityDefault}}, ix.Endpoints())
}

func TestSetEndpointsDropsRemoved(t *testing.T) {
	ix, _ := newTest(t, Config{Enabled: true}, nil)
	require.NoError(t, ix.Bind(Binding{}))
	ix.SetEndpoints([]string{"a", "b"})
	ix.Record("a", keys(1, 4))
	ix.Record("b", keys(1, 4))
	ix.SetEndpoints([]string{"b"})
	require.Equal(t, 0, ix.Entries("a"))
	require.Equal(t, 4, ix.Entries("b"))
	require.Equal(t, 4, ix.Stats().Entries)
	require.Equal(t, 4, ix.Drop("b"))
	require.Equal(t, Stats{MaxBytes: DefaultMaxBytes}, ix.Stats())
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	ix, clk := newTest(t, Config{Enabled: true, Refresh: time.Second}, reg)
	var aLive atomic.Bool
	require.NoError(t, ix.Bind(Binding{Live: func(id string) bool { return id == "a" && aLive.Load() }}))
	ix.SetEndpoints([]string{"a", "b"})
	ix.Record("a", keys(1, 3))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kvroute_approx_endpoint_mode Each endpoint's cache mode (1 for the current one): precise (KV events live), approximate (the router's own decisions), blind (no cache information).
# TYPE kvroute_approx_endpoint_mode gauge
kvroute_approx_endpoint_mode{endpoint="a",mode="approximate"} 1
kvroute_approx_endpoint_mode{endpoint="a",mode="blind"} 0
kvroute_approx_endpoint_mode{endpoint="a",mode="precise"} 0
kvroute_approx_endpoint_mode{endpoint="b",mode="approximate"} 1
kvroute_approx_endpoint_mode{endpoint="b",mode="blind"} 0
kvroute_approx_endpoint_mode{endpoint="b",mode="precise"} 0
# HELP kvroute_approx_entries Approximate entries held over all endpoints.
# TYPE kvroute_approx_entries gauge
kvroute_approx_entries 3
# HELP kvroute_approx_recorded_blocks_total Block keys the approximate index recorded from the router's decisions (sent to an endpoint whose KV events are not live).
# TYPE kvroute_approx_recorded_blocks_total counter
kvroute_approx_recorded_blocks_total 3
`), "kvroute_approx_endpoint_mode", "kvroute_approx_entries", "kvroute_approx_recorded_blocks_total"))
	aLive.Store(true)
	clk.Advance(time.Second)
	ix.Current()
	require.Equal(t, 3.0, testutil.ToFloat64(ix.met.evicted[reasonLive]))
	require.Equal(t, 0, ix.Stats().Entries)
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		json, err string
	}{
		{`{"enabled":true,"ttl":"5m","maxBytes":1048576,"refresh":"250ms","capacity":{"gpuBlocks":1000,"cpuBlocks":4000,"blockSize":16},"endpoints":{"vllm-0":{"gpuBlocks":10}}}`, ""},
		{`{"ttl":300}`, "duration"},
		{`{"enabled":true,"bogus":1}`, "bogus"},
		{`{"ttl":"-1s"}`, "ttl must be"},
		{`{"maxBytes":-1}`, "maxBytes"},
		{`{"maxBytes":100}`, "at least 1024"},
		{`{"capacity":{"cpuBlocks":5}}`, "cpuBlocks without gpuBlocks"},
		// A block size alone was dropped with the rest of the capacity
		// for the default's 16-token blocks, halving the capacity of
		// engines of 32-token blocks without a word.
		{`{"capacity":{"blockSize":32}}`, "blockSize without gpuBlocks"},
		{`{"endpoints":{"a":{"cpuBlocks":0}}}`, "gpuBlocks is required"},
		{`{"endpoints":{"a":{"gpuBlocks":-1}}}`, ">= 0"},
		{`{"capacityFrom":"config"}`, ""},
		{`{"capacityFrom":"prometheus"}`, "capacityFrom must be"},
	} {
		cfg, err := LoadConfig(strings.NewReader(tc.json))
		if tc.err == "" {
			require.NoError(t, err, tc.json)
			_, err = New(cfg, Options{})
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, tc.err, tc.json)
	}
	cfg, err := Config{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, Config{TTL: DefaultTTL, Capacity: Capacity{GPUBlocks: DefaultGPUBlocks, BlockSize: DefaultEngineBlockSize}, MaxBytes: DefaultMaxBytes, Refresh: DefaultRefresh, CapacityFrom: CapacityFromEngine}, cfg)
	ix, _ := newTest(t, Config{}, nil)
	require.Error(t, ix.SetCapacity("a", Capacity{CPUBlocks: 3}))
	require.NoError(t, ix.SetCapacity("a", Capacity{GPUBlocks: 128, BlockSize: 64}))
	require.Equal(t, "precise approximate blind", ModePrecise.String()+" "+ModeApproximate.String()+" "+ModeBlind.String())
}

// Record, Match, Drop, refreshes and SetEndpoints race freely (go test
// -race); the totals stay consistent with the endpoints' entries.
func TestConcurrent(t *testing.T) {
	ix, err := New(Config{Enabled: true, Refresh: time.Nanosecond, MaxBytes: 64 * 1000}, Options{})
	require.NoError(t, err)
	var flip atomic.Bool
	require.NoError(t, ix.Bind(Binding{Live: func(id string) bool { return id == "e0" && flip.Load() }}))
	ids := []string{"e0", "e1", "e2", "e3"}
	ix.SetEndpoints(ids)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				id := ids[(g+i)%len(ids)]
				ix.Record(id, keys(i*7, 20))
				ix.Match(id, keys(i*7, 20))
				ix.Current()
				switch i % 500 {
				case 100:
					flip.Store(!flip.Load())
				case 200:
					ix.Drop(ids[g])
				case 300:
					ix.SetEndpoints(ids[:3])
				case 400:
					ix.SetEndpoints(ids)
				}
			}
		}()
	}
	wg.Wait()
	sum := 0
	for _, id := range ids {
		sum += ix.Entries(id)
	}
	st := ix.Stats()
	require.Equal(t, sum, st.Entries)
	require.LessOrEqual(t, st.Bytes, st.MaxBytes)
}
