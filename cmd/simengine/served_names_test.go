package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// --served-model-name takes the names as vLLM does (several arguments after
// the flag), comma- or space-separated in one value, or repeated; the first
// is the served model and the others its aliases.
func TestServedModelNameFlag(t *testing.T) {
	for name, args := range map[string][]string{
		"vLLM's form":     {"--served-model-name", "a", "b", "c", "--port", "0"},
		"vLLM's form, =":  {"--served-model-name=a", "b", "c"},
		"one flag dash":   {"-served-model-name", "a", "b", "c"},
		"commas":          {"--served-model-name", "a,b, c"},
		"spaces":          {"--served-model-name", "a b c"},
		"repeated":        {"--served-model-name", "a", "--served-model-name", "b,c"},
		"after --model":   {"--model", "/weights/a", "--served-model-name", "a", "b", "c"},
		"before --enable": {"--served-model-name", "a", "b", "c", "--enable-scale-out"},
	} {
		o, err := parseFlags(args)
		require.NoError(t, err, name)
		require.Equal(t, "a", o.cfg.Model, name)
		require.Equal(t, []string{"b", "c"}, o.cfg.ServedModelAliases, name)
		wantPath := "sim-model" // --model's default
		if name == "after --model" {
			wantPath = "/weights/a"
		}
		require.Equal(t, wantPath, o.cfg.ModelPath, "%s: --model is the model's path, as vLLM's", name)
	}

	o, err := parseFlags([]string{"--served-model-name", "a"})
	require.NoError(t, err)
	require.Equal(t, "a", o.cfg.Model, "one name: the served model, as --model alone")
	require.Nil(t, o.cfg.ServedModelAliases)
	o, err = parseFlags([]string{"--model", "m"})
	require.NoError(t, err)
	require.Equal(t, "m", o.cfg.Model)
	require.Empty(t, o.cfg.ModelPath, "--model alone: its name is its path")
	require.Nil(t, o.cfg.ServedModelAliases)

	o, err = parseFlags([]string{"--served-model-name", "a,,b"})
	require.NoError(t, err)
	require.Equal(t, []string{"", "b"}, o.cfg.ServedModelAliases, "an empty name is kept for server.New to refuse")
	err = run([]string{"--served-model-name", "a,,b"})
	require.ErrorContains(t, err, "alias 0 is empty")

	_, err = parseFlags([]string{"--served-model-name"})
	require.Error(t, err, "the flag needs a value")
	_, err = parseFlags([]string{"--served-model-name", "a", "--", "b"})
	require.Error(t, err, "after --, a positional argument as before")
}
