package kvindex

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/stretchr/testify/require"
)

func TestSpeculativeEntriesExpire(t *testing.T) {
	clk := newFakeClock()
	ix := newTestIndex(t, Config{SpeculativeWeight: 0.5}, Options{Set: telemetry.Set{Clock: clk}})
	prompt := seq(1, 3*testBS)
	keys := Keys(nil, prompt, testBS, &KeyParams{Model: "m"})
	ix.Speculate("a", keys, 0) // default TTL 2s

	r := match(ix, "m", prompt, "a").Endpoints()[0]
	require.Equal(t, EndpointMatch{Endpoint: "a", Blocks: 3, Score: 1.5, Speculative: 3}, r)
	require.Equal(t, 3, ix.Stats().Speculative)

	clk.Advance(2*time.Second - time.Millisecond)
	require.Equal(t, 3, match(ix, "m", prompt, "a").Endpoints()[0].Blocks)
	require.Equal(t, 0, ix.Sweep())

	clk.Advance(time.Millisecond)
	// Match enforces expiry before any sweep ...
	require.Equal(t, 0, match(ix, "m", prompt, "a").Endpoints()[0].Blocks)
	require.Equal(t, 3, ix.Stats().Memberships)
	// ... and the sweep removes and counts the entries.
	require.Equal(t, 3, ix.Sweep())
	st := ix.Stats()
	require.Equal(t, 0, st.Memberships)
	require.Equal(t, 0, st.Blocks)
	require.Equal(t, 0, st.Speculative)
	require.Equal(t, uint64(3), st.SpeculativeExpiries)
	require.Equal(t, 0, ix.Sweep())
}

func TestConfirmedStoreSupersedesSpeculation(t *testing.T) {
	clk := newFakeClock()
	ix := newTestIndex(t, Config{}, Options{Set: telemetry.Set{Clock: clk}})
	prompt := seq(1, 3*testBS)
	keys := Keys(nil, prompt, testBS, &KeyParams{Model: "m"})
	ix.Speculate("a", keys, time.Second)
	// The engine confirms blocks 0 and 1.
	require.NoError(t, ix.Store("a", storeEv("m", 1, prompt[:2*testBS])))
	r := match(ix, "m", prompt, "a").Endpoints()[0]
	require.Equal(t, EndpointMatch{Endpoint: "a", Blocks: 3, Score: 3, GPU: 2, Speculative: 1}, r)
	require.Equal(t, 3, ix.Stats().Memberships)
	require.Equal(t, 1, ix.Stats().Speculative)

	clk.Advance(time.Second)
	require.Equal(t, 1, ix.Sweep(), "only the unconfirmed block expires")
	r = match(ix, "m", prompt, "a").Endpoints()[0]
	require.Equal(t, EndpointMatch{Endpoint: "a", Blocks: 2, Score: 2, GPU: 2}, r)
	// Speculating a confirmed block changes nothing, and never expires it.
	ix.Speculate("a", keys[:2], time.Millisecond)
	clk.Advance(time.Second)
	require.Equal(t, 0, ix.Sweep())
	require.Equal(t, 2, match(ix, "m", prompt, "a").Endpoints()[0].Blocks)
	require.Equal(t, 0, ix.Stats().Speculative)
}

func TestSpeculationExtendsNeverShortens(t *testing.T) {
	clk := newFakeClock()
	ix := newTestIndex(t, Config{SpeculativeTTL: 5 * time.Second}, Options{Set: telemetry.Set{Clock: clk}})
	keys := Keys(nil, seq(1, testBS), testBS, &KeyParams{Model: "m"})
	ix.Speculate("a", keys, 0) // 5s from the config
	ix.Speculate("a", keys, time.Second)
	clk.Advance(3 * time.Second)
	require.Equal(t, 0, ix.Sweep())
	require.Equal(t, 1, match(ix, "m", seq(1, testBS), "a").Endpoints()[0].Blocks)
	ix.Speculate("a", keys, 4*time.Second) // now until 7s
	clk.Advance(2500 * time.Millisecond)
	require.Equal(t, 0, ix.Sweep())
	clk.Advance(1500 * time.Millisecond)
	require.Equal(t, 1, ix.Sweep())
	require.Equal(t, 0, ix.Stats().Memberships)
	ix.Speculate("a", nil, 0)
}

func TestSpeculationCoexistsWithOtherEndpoints(t *testing.T) {
	clk := newFakeClock()
	ix := newTestIndex(t, Config{}, Options{Set: telemetry.Set{Clock: clk}})
	prompt := seq(1, 2*testBS)
	require.NoError(t, ix.Store("b", storeEv("m", 1, prompt)))
	ix.Speculate("a", Keys(nil, prompt, testBS, &KeyParams{Model: "m"}), time.Second)
	require.Equal(t, []int{2, 2}, blocksOf(match(ix, "m", prompt, "a", "b")))
	clk.Advance(time.Second)
	require.Equal(t, 2, ix.Sweep())
	require.Equal(t, []int{0, 2}, blocksOf(match(ix, "m", prompt, "a", "b")))
	require.Equal(t, 2, ix.Stats().Blocks)
}

func TestSweeperRemovesExpiredEntriesAndStops(t *testing.T) {
	defer leakcheck.Check(t)()
	clk := newFakeClock()
	ix, err := New(Config{BlockSize: testBS, SweepInterval: time.Millisecond}, Options{Set: telemetry.Set{Clock: clk}})
	require.NoError(t, err)
	defer ix.Close() // also when an assertion fails: the sweeper must not outlive the test
	ix.Speculate("a", Keys(nil, seq(1, 2*testBS), testBS, &KeyParams{Model: "m"}), time.Second)
	require.Equal(t, 2, ix.Stats().Speculative)
	// The sweeper's ticker is armed on the manual clock by its own
	// goroutine: advancing before it is armed would start its interval
	// after the advance, and no tick would ever come.
	require.Eventually(t, func() bool { return clk.Waiters() == 1 }, 10*time.Second, time.Millisecond,
		"the sweeper's ticker is armed on the index clock")
	clk.Advance(time.Second)
	require.Eventually(t, func() bool { return ix.Stats().SpeculativeExpiries == 2 }, 10*time.Second, time.Millisecond)
	require.Equal(t, 0, ix.Stats().Memberships)
	ix.Close()
	ix.Close() // idempotent
	// The index stays usable after Close.
	require.NoError(t, ix.Store("a", storeEv("m", 1, seq(1, testBS))))
}

func TestCloseWithoutSweeper(t *testing.T) {
	defer leakcheck.Check(t)()
	ix, err := New(Config{SweepInterval: -1}, Options{})
	require.NoError(t, err)
	ix.Close()
	ix.Close()
}

// The background sweeper runs on the index's clock: advancing a manual
// clock by the sweep interval sweeps the expired entries, with no wall time
// passing.
func TestSweeperTicksOnTheIndexClock(t *testing.T) {
	defer leakcheck.Check(t)()
	clk := newFakeClock()
	ix := newTestIndex(t, Config{SweepInterval: time.Minute}, Options{Set: telemetry.Set{Clock: clk}})
	defer ix.Close()
	keys := Keys(nil, seq(1, 3*testBS), testBS, &KeyParams{Model: "m"})
	ix.Speculate("a", keys, time.Second)
	require.Eventually(t, func() bool { return clk.Waiters() == 1 }, 10*time.Second, time.Millisecond,
		"the sweeper's ticker is armed on the index clock")
	clk.Advance(time.Second)
	require.Equal(t, 3, ix.Stats().Speculative, "expired, but not swept before the sweep interval")
	clk.Advance(time.Minute - time.Second)
	require.Eventually(t, func() bool { return ix.Stats().SpeculativeExpiries == 3 }, 10*time.Second, time.Millisecond,
		"the tick at one sweep interval swept the entries")
	require.Equal(t, 0, ix.Stats().Speculative)
}

// Speculation makes an endpoint with non-prefix cache groups warm too: the
// blocks it is speculated to hold count as held by its sliding-window and
// Mamba groups, as the request routed there will cache them in every
// group. The groups only knew the engine's confirmed entries, so a hybrid
// endpoint that had reported any group was never warm for a prefix routed
// to it (2 blocks, the last confirmed state, and 0 for a new prompt), while
// one that had not was.
func TestSpeculationCountsInCacheGroups(t *testing.T) {
	clk := newFakeClock()
	ix := newTestIndex(t, Config{}, Options{Set: telemetry.Set{Clock: clk}})
	prompt := seq(1, 12*testBS)
	other := seq(9000, 6*testBS)
	for _, name := range []string{"mamba", "window"} {
		require.NoError(t, ix.Store(name, storeEv("m", 100, prompt[:8*testBS])))
	}
	_, err := ix.StoreGroup("mamba", &GroupStore{Group: 1, Kind: GroupMamba, Hashes: []uint64{101}})
	require.NoError(t, err)
	_, err = ix.StoreGroup("window", &GroupStore{Group: 1, Kind: GroupSlidingWindow, Window: 2*testBS + 1,
		Hashes: []uint64{100, 101}})
	require.NoError(t, err)
	require.Equal(t, []int{2, 2}, blocksOf(match(ix, "m", prompt, "mamba", "window")))

	key := func(toks []uint32) []Key { return Keys(nil, toks, testBS, &KeyParams{Model: "m"}) }
	for _, name := range []string{"mamba", "window"} {
		ix.Speculate(name, key(prompt), time.Second)
		ix.Speculate(name, key(other), time.Second)
	}
	wide := []string{"mamba", "window"}
	for i := 0; i < 70; i++ { // and on the path for more than 64 candidates
		wide = append(wide, fmt.Sprintf("x%d", i))
	}
	for _, cs := range [][]string{wide[:2], wide} {
		r := match(ix, "m", prompt, cs...)
		require.Equal(t, []int{12, 12}, blocksOf(r)[:2], "%d candidates", len(cs))
		require.Equal(t, 4, r.Speculative(0))
		require.Equal(t, []int{6, 6}, blocksOf(match(ix, "m", other, cs...))[:2], "%d candidates", len(cs))
	}

	// Expired, the speculation counts nowhere.
	clk.Advance(time.Second)
	require.Equal(t, []int{2, 2}, blocksOf(match(ix, "m", prompt, "mamba", "window")))
	require.Equal(t, []int{0, 0}, blocksOf(match(ix, "m", other, "mamba", "window")))
}

// A TTL too long for the index clock's arithmetic (math.MaxInt64, "never
// expire") keeps the speculation for as long as the index can say: the
// expiry was the clock's offset plus the TTL, which wrapped negative once
// the clock had moved, and read as already expired, so such a
// speculation never counted.
func TestSpeculationWithTheLongestTTLCounts(t *testing.T) {
	clk := newFakeClock()
	ix := newTestIndex(t, Config{SpeculativeTTL: math.MaxInt64}, Options{Set: telemetry.Set{Clock: clk}})
	clk.Advance(time.Second)
	prompt := seq(1, 3*testBS)
	keys := Keys(nil, prompt, testBS, &KeyParams{Model: "m"})
	ix.Speculate("a", keys[:2], 0) // the config's
	ix.Speculate("b", keys, math.MaxInt64)
	clk.Advance(time.Hour)
	require.Equal(t, 0, ix.Sweep())
	require.Equal(t, []int{2, 3}, blocksOf(match(ix, "m", prompt, "a", "b")))
}
