package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLoRAFlags(t *testing.T) {
	o, err := parseFlags([]string{"--lora-modules", "a,b", "--max-loras", "2", "--lora-load-time", "20ms"})
	require.NoError(t, err)
	require.NotNil(t, o.cfg.Engine.LoRA)
	require.Equal(t, 2, o.cfg.Engine.LoRA.MaxLoRAs)
	require.Equal(t, 20*time.Millisecond, o.cfg.Engine.LoRA.LoadTime)
	o, err = parseFlags([]string{"--lora-modules", "a"})
	require.NoError(t, err)
	require.Nil(t, o.cfg.Engine.LoRA, "without --max-loras adapters are always loaded")
	// Without slots there is no load to time: the flag would be ignored.
	_, err = parseFlags([]string{"--lora-modules", "a", "--lora-load-time", "20ms"})
	require.ErrorContains(t, err, "--lora-load-time needs --max-loras")
}

// The comma-separated lists of names take spaces around the commas, as
// the other list flags do: "a, b" serves the adapter (and the extra model)
// "b", not " b", which no client names and so was answered 404.
func TestNameListsTrimSpaces(t *testing.T) {
	o, err := parseFlags([]string{"--lora-modules", "a, b", "--extra-models", " c ,d"})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, o.cfg.LoRAModules)
	require.Equal(t, []string{"c", "d"}, o.cfg.ExtraModels)
}

func TestAllowRuntimeLoRAUpdatingFlag(t *testing.T) {
	o, err := parseFlags(nil)
	require.NoError(t, err)
	require.False(t, o.cfg.AllowRuntimeLoRAUpdating, "off by default, as in vLLM")
	o, err = parseFlags([]string{"--allow-runtime-lora-updating"})
	require.NoError(t, err)
	require.True(t, o.cfg.AllowRuntimeLoRAUpdating)
}
