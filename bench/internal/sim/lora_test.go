package sim

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoRAStudySmall: a small seeded run is deterministic, and the adapter
// scorer loads adapters less often than load-only routing.
func TestLoRAStudySmall(t *testing.T) {
	cfg := DefaultLoRAConfig(40)
	cfg.Requests = 400
	results := map[string]LoRAResult{}
	for _, p := range LoRAPolicies {
		r, err := RunLoRA(cfg, p)
		require.NoError(t, err)
		require.Equal(t, cfg.Requests, r.Requests, p)
		results[p] = r
		t.Logf("%-14s loads/1k %6.1f  TTFT mean %v p50 %v p90 %v", p, r.LoadsPer1k, r.TTFTMean, r.TTFTP50, r.TTFTP90)
	}
	again, err := RunLoRA(cfg, LoRAPolicyScorer)
	require.NoError(t, err)
	require.Equal(t, results[LoRAPolicyScorer], again, "same seed, same result")
	require.Less(t, results[LoRAPolicyScorer].Loads, results[LoRAPolicyLoad].Loads)
	_, err = RunLoRA(cfg, "nope")
	require.Error(t, err)
}

// TestLoRARefusesInfiniteValues: an infinite rate or Zipf exponent is an
// error; the exponent made the adapter draw loop forever.
func TestLoRARefusesInfiniteValues(t *testing.T) {
	for _, mod := range []func(*LoRAConfig){
		func(c *LoRAConfig) { c.Zipf = math.Inf(1) },
		func(c *LoRAConfig) { c.Zipf = math.NaN() },
		func(c *LoRAConfig) { c.Rate = math.Inf(1) },
	} {
		cfg := DefaultLoRAConfig(10)
		cfg.Requests = 10
		mod(&cfg)
		_, err := RunLoRA(cfg, LoRAPolicyScorer)
		require.Error(t, err)
	}
}
