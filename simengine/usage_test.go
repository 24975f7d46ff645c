package simengine

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// kvUsage reads vllm:kv_cache_usage_perc from reg.
func kvUsage(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "vllm:kv_cache_usage_perc" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no vllm:kv_cache_usage_perc")
	return 0
}

// With Config.NullBlock the engine keeps block 0 out of use as vLLM's
// BlockPool keeps its null block, and vllm:kv_cache_usage_perc divides by
// the other NumGPUBlocks-1 blocks, as BlockPool.get_usage does: 0 when
// idle, 1 when a request holds every usable block.
func TestKVCacheUsageLeavesOutTheNullBlock(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := New(Config{Model: "m", BlockSize: 4, NumGPUBlocks: 9, NullBlock: true}, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	require.Equal(t, 8, e.Stats().FreeBlocks)
	require.Equal(t, 9, e.Stats().NumBlocks, "num_gpu_blocks counts the null block, as vLLM's")
	require.Zero(t, kvUsage(t, reg))

	// 9 blocks of tokens do not fit in the 8 usable ones.
	_, err = e.Submit(Request{Prompt: seqTokens(1, 33), MaxTokens: 4})
	require.True(t, errors.Is(err, ErrTooLong), "%v", err)

	// A request of 8 blocks holds every usable block while it runs.
	_, err = e.Submit(Request{Prompt: seqTokens(1, 31), MaxTokens: 1})
	require.NoError(t, err)
	full := false
	for !full {
		at, ok := e.NextEventTime()
		require.True(t, ok, "the request finished without holding every usable block")
		e.AdvanceTo(at)
		full = e.Stats().FreeBlocks == 0
	}
	require.Equal(t, 1.0, kvUsage(t, reg))
	e.RunUntilIdle()
	require.Zero(t, kvUsage(t, reg))
	require.True(t, e.ResetPrefixCache(), "the null block does not count as in use")

	_, err = New(Config{NumGPUBlocks: 1, NullBlock: true}, Options{})
	require.True(t, errors.Is(err, ErrBadConfig), "%v", err)
}

// Without Config.NullBlock every block is usable and the usage divides by
// all of them.
func TestKVCacheUsageWithoutNullBlock(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := New(Config{Model: "m", BlockSize: 4, NumGPUBlocks: 9}, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	require.Equal(t, 9, e.Stats().FreeBlocks)
	_, err = e.Submit(Request{Prompt: seqTokens(1, 31), MaxTokens: 1})
	require.NoError(t, err)
	for e.Stats().FreeBlocks != 1 {
		at, ok := e.NextEventTime()
		require.True(t, ok)
		e.AdvanceTo(at)
	}
	require.InDelta(t, 8.0/9, kvUsage(t, reg), 1e-12)
}
