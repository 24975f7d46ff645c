package kvindex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestZeroConfigDefaults(t *testing.T) {
	ix := newTestIndex(t, Config{BlockSize: 0})
	require.Equal(t, testBS, ix.BlockSize()) // newTestIndex sets 4
	ix2, err := New(Config{}, Options{})
	require.NoError(t, err)
	defer ix2.Close()
	require.Equal(t, DefaultBlockSize, ix2.BlockSize())
	require.Equal(t, DefaultMaxBlocksPerEndpoint, ix2.maxBlocks)
	require.Equal(t, DefaultMaxBytes, ix2.maxBytes)
	require.Equal(t, DefaultSpeculativeTTL, ix2.specTTL)
	require.Equal(t, 1.0, ix2.specWeight)
	tt := ix2.tiers.Load()
	require.Equal(t, 1.0, tt.maxW[1])   // gpu
	require.Equal(t, 0.8, tt.maxW[2])   // cpu
	require.Equal(t, 1.0, tt.maxW[4])   // storage
	require.Equal(t, 1.0, tt.maxW[1|2]) // highest wins
}

func TestInvalidConfig(t *testing.T) {
	for _, cfg := range []Config{
		{BlockSize: -1},
		{SpeculativeWeight: -1},
		{SpeculativeWeight: math.NaN()},
		{SpeculativeTTL: -time.Second},
		{MaxBlocksPerEndpoint: -5},
		{MaxBytes: -1},
		{TierWeights: map[string]float64{"cpu": -0.1}},
		{TierWeights: map[string]float64{"cpu": math.Inf(1)}},
		{TierWeights: map[string]float64{"CPU": 0.5}},
		{TierWeights: map[string]float64{"": 0.5}},
	} {
		_, err := New(cfg, Options{})
		require.Error(t, err, "%+v", cfg)
	}
}

func TestNegativeMaxBytesIsAClearError(t *testing.T) {
	_, err := New(Config{MaxBytes: -1}, Options{})
	require.EqualError(t, err, "kvindex: maxBytes must be >= 0 (0 means the default 8589934592), got -1")
	_, err = LoadConfig(strings.NewReader(`{"maxBytes":-4096}`))
	require.ErrorContains(t, err, "maxBytes must be >= 0")
	_, err = LoadConfig(strings.NewReader(`{"maxBytes":"1GiB"}`))
	require.ErrorContains(t, err, "maxBytes")
}

func TestConfigJSON(t *testing.T) {
	in := `{"blockSize":16,"tierWeights":{"cpu":0.5},"speculativeWeight":0.9,"speculativeTTL":"3s",` +
		`"maxBlocksPerEndpoint":1000,"sweepInterval":"-1ns","maxBytes":1073741824}`
	cfg, err := LoadConfig(strings.NewReader(in))
	require.NoError(t, err)
	require.Equal(t, Config{BlockSize: 16, TierWeights: map[string]float64{"cpu": 0.5}, SpeculativeWeight: 0.9,
		SpeculativeTTL: 3 * time.Second, MaxBlocksPerEndpoint: 1000, SweepInterval: -1, MaxBytes: 1 << 30}, cfg)
	ix, err := New(cfg, Options{})
	require.NoError(t, err)
	ix.Close()

	_, err = LoadConfig(strings.NewReader(`{"blocksize":16}`))
	require.ErrorContains(t, err, `blocksize: unknown key (did you mean "blockSize"?`)
	_, err = LoadConfig(strings.NewReader(`{"registerer":1}`))
	require.ErrorContains(t, err, "registerer: unknown key")
	_, err = LoadConfig(strings.NewReader(`{"speculativeTTL":3000000000}`))
	require.ErrorContains(t, err, "speculativeTTL: bare number")

	// Marshal writes durations as strings, and they read back.
	out, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.Contains(t, string(out), `"speculativeTTL":"3s"`)
	require.Contains(t, string(out), `"maxBytes":1073741824`)
	back, err := LoadConfig(bytes.NewReader(out))
	require.NoError(t, err)
	require.Equal(t, cfg, back)
}

func TestTierNamesBeyondTheLimitShareTheLastID(t *testing.T) {
	weights := map[string]float64{}
	for i := 0; i < 12; i++ {
		weights["tier-"+string(rune('a'+i))] = 0.5
	}
	ix := newTestIndex(t, Config{TierWeights: weights})
	require.NoError(t, ix.Store("a", storeEv("m", 1, seq(1, testBS))))
	for i := 0; i < 12; i++ {
		ev := &StoreEvent{EngineHashes: []uint64{1}, BlockSize: testBS, Tier: "tier-" + string(rune('a'+i)), Group: 0}
		require.NoError(t, ix.Store("a", ev))
	}
	require.Len(t, ix.tiers.Load().names, maxTiers)
	r := match(ix, "m", seq(1, testBS), "a").Endpoints()[0]
	require.Equal(t, 1, r.Other)
	require.Equal(t, 1, r.GPU)
	// A removal under a name past the limit finds the shared tier its
	// stores went to.
	for i := maxTiers - 3; i < 12; i++ {
		ix.Remove("a", []uint64{1}, "tier-"+string(rune('a'+i)), 0)
	}
	require.Equal(t, 1, ix.Remove("a", []uint64{1}, "gpu", 0))
	for i := 0; i < maxTiers-3; i++ {
		ix.Remove("a", []uint64{1}, "tier-"+string(rune('a'+i)), 0)
	}
	for _, r := range match(ix, "m", seq(1, testBS), "a").Endpoints() {
		require.Zero(t, r.Blocks, "every store under a shared tier had its removal")
	}
}

// Media that kvroute does not know and the configuration does not name,
// as a broken or hostile publisher may send by the thousand, share one
// tier: they cannot take the slots that a real tier arriving later needs,
// which then keeps its own class and weight; their removals find it.
func TestUnknownMediaShareOneTier(t *testing.T) {
	ix := newTestIndex(t, Config{TierWeights: map[string]float64{"storage": 0.25}})
	require.NoError(t, ix.Store("a", storeEv("m", 1, seq(1, 2*testBS))))
	for i := 0; i < 20; i++ {
		ev := &StoreEvent{EngineHashes: []uint64{1}, BlockSize: testBS, Tier: fmt.Sprintf("made-up-%d", i), Group: 0}
		require.NoError(t, ix.Store("a", ev))
	}
	require.NoError(t, ix.Store("a", &StoreEvent{EngineHashes: []uint64{2}, BlockSize: testBS, Tier: "DISK", Group: 0}))
	require.Equal(t, []string{"gpu", "cpu", "storage", "other", "disk"}, ix.tiers.Load().names)
	require.Equal(t, 2, ix.Remove("a", []uint64{1, 2}, "gpu", 0))
	r := match(ix, "m", seq(1, 2*testBS), "a").Endpoints()[0]
	require.Equal(t, 2, r.Blocks)
	require.Equal(t, 1, r.Other)
	require.Equal(t, 1, r.Storage, "disk keeps the storage class")
	// Each store took a reference on the shared tier; each removal, under
	// whichever unknown name, returns one, and the last takes the block.
	gone := 0
	for i := 0; i < 20; i++ {
		gone += ix.Remove("a", []uint64{1}, fmt.Sprintf("other-name-%d", i), 0)
	}
	require.Equal(t, 1, gone)
	r = match(ix, "m", seq(1, 2*testBS), "a").Endpoints()[0]
	require.Zero(t, r.Blocks, "block 0 gone, so no prefix")
}
