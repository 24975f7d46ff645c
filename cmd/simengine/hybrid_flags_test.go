package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/simengine"
)

func TestHybridFlags(t *testing.T) {
	o, err := parseFlags([]string{"--sliding-window", "512", "--mamba", "--kv-cache-group-order", "window-first"})
	require.NoError(t, err)
	require.Equal(t, &simengine.HybridConfig{SlidingWindow: 512, Mamba: true, GroupOrder: simengine.OrderWindowFirst}, o.cfg.Engine.Hybrid)
	o, err = parseFlags(nil)
	require.NoError(t, err)
	require.Nil(t, o.cfg.Engine.Hybrid)
	_, err = parseFlags([]string{"--kv-cache-group-order", "window-first"})
	require.ErrorContains(t, err, "--sliding-window")
	o, err = parseFlags([]string{"--sliding-window", "1024", "--sliding-window-groups", "5", "--kv-cache-group-order", "window-first"})
	require.NoError(t, err)
	require.Equal(t, &simengine.HybridConfig{SlidingWindow: 1024, WindowGroups: 5, GroupOrder: simengine.OrderWindowFirst}, o.cfg.Engine.Hybrid)
	_, err = parseFlags([]string{"--sliding-window-groups", "5"})
	require.ErrorContains(t, err, "--sliding-window")
	for _, flag := range []string{"--sliding-window-blocks", "--mamba-states"} {
		_, err = parseFlags([]string{"--sliding-window", "512", "--mamba", flag, "64"})
		require.ErrorContains(t, err, "--num-gpu-blocks", "%s: the groups share the pool", flag)
	}
}
