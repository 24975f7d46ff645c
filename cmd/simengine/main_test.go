package main

import (
	"testing"
	"time"

	"github.com/kvroute/kvroute/simengine/server"
	"github.com/stretchr/testify/require"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--model", "m", "--port", "0", "--block-size", "16", "--num-gpu-blocks", "100",
		"--max-num-batched-tokens", "512", "--enable-scale-out", "--kv-events-format", "legacy",
		"--kv-events-config", `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","buffer_steps":100,"topic":"kv@x@m"}`,
		"--prefill-tokens-per-second", "5000", "--decode-step", "5ms", "--time-scale", "0.5", "--lora-modules", "a,b"})
	require.NoError(t, err)
	require.Equal(t, "m", o.cfg.Model)
	require.Equal(t, 0, o.port)
	require.Equal(t, "127.0.0.1", o.host)
	require.Equal(t, 16, o.cfg.Engine.BlockSize)
	require.Equal(t, 100, o.cfg.Engine.NumGPUBlocks)
	require.Equal(t, 512, o.cfg.Engine.MaxNumBatchedTokens)
	require.True(t, o.cfg.EnableScaleOut)
	require.Equal(t, "legacy", o.cfg.KVEventsFormat)
	require.True(t, o.cfg.KVEvents.Active())
	require.Equal(t, "tcp://*:5558", *o.cfg.KVEvents.ReplayEndpoint)
	require.Equal(t, 100, o.cfg.KVEvents.BufferSteps)
	require.Equal(t, 5000.0, o.cfg.Engine.PrefillTokensPerSecond)
	require.Equal(t, 5*time.Millisecond, o.cfg.Engine.DecodeStep)
	require.Equal(t, 0.5, o.cfg.Engine.TimeScale)
	require.Equal(t, []string{"a", "b"}, o.cfg.LoRAModules)

	o, err = parseFlags(nil)
	require.NoError(t, err)
	require.Equal(t, 64, o.cfg.Engine.BlockSize)
	require.Equal(t, 8000, o.port)
	require.False(t, o.cfg.KVEvents.Active())
	require.False(t, o.cfg.EnableScaleOut)

	_, err = parseFlags([]string{"--kv-events-config", `{"enable_kv_cache_events":true,"bogus":1}`})
	require.ErrorIs(t, err, server.ErrBadKVEventsConfig)
	_, err = parseFlags([]string{"extra"})
	require.Error(t, err)
}
