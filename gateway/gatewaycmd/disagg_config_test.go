package gatewaycmd

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/disagg"
)

func TestConfigFileDisaggSection(t *testing.T) {
	cfg := writeFile(t, "gateway.yaml", `
model: m
gateway:
  disagg: {nonCachedTokens: 2048, maxPrefillQueueTokens: 65536}
`)
	eps := writeFile(t, "eps.json", `[{"id": "10.0.0.1:8000", "role": "prefill"}, {"id": "10.0.0.2:8000", "role": "decode"}]`)
	o, err := parseFlags([]string{"--config", cfg, "--endpoints-file", eps}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, &disagg.Config{NonCachedTokens: 2048, MaxPrefillQueueTokens: 65536}, o.server.Disagg)
	require.Equal(t, disagg.RolePrefill, o.server.Endpoints[0].Role)
	require.Equal(t, disagg.RoleDecode, o.server.Endpoints[1].Role)

	o, err = parseFlags([]string{"--config", writeFile(t, "r.yaml", "model: m\n"), "--endpoints", "10.0.0.1:8000"}, io.Discard)
	require.NoError(t, err)
	require.Nil(t, o.server.Disagg, "no section: one role")

	for content, want := range map[string]string{
		"gateway:\n  disagg: {nonCached: 1}\n":              "gateway.disagg.nonCached: unknown key",
		"gateway:\n  disagg: {maxPrefillQueueTokens: -1}\n": "gateway.disagg",
	} {
		_, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", content), "--endpoints", "10.0.0.1:8000", "--model", "m"}, io.Discard)
		require.ErrorContains(t, err, want, content)
	}
	_, err = parseFlags([]string{"--model", "m", "--endpoints-file", writeFile(t, "bad.json", `[{"id": "10.0.0.1:8000", "role": "prefil"}]`)}, io.Discard)
	require.ErrorContains(t, err, `role "prefil"`)
}
