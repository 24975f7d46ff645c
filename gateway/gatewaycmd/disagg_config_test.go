package gatewaycmd

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/disagg"
	"github.com/kvroute/kvroute/disagg/sidecar"
	"github.com/kvroute/kvroute/gateway"
	"github.com/kvroute/kvroute/render"
)

func TestConfigFileDisaggSection(t *testing.T) {
	cfg := writeFile(t, "gateway.yaml", `
model: m
gateway:
  disagg: {nonCachedTokens: 2048, maxPrefillQueueTokens: 65536}
`)
	eps := writeFile(t, "eps.json", `[{"id": "10.0.0.1:8000", "role": "prefill"}, {"id": "10.0.0.2:8000", "role": "decode"}]`)
	o, err := parseFlags([]string{"--config", cfg, "--endpoints-file", eps}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, &disagg.Config{NonCachedTokens: 2048, MaxPrefillQueueTokens: 65536}, o.server.Disagg)
	require.Equal(t, disagg.RolePrefill, o.server.Endpoints[0].Role)
	require.Equal(t, disagg.RoleDecode, o.server.Endpoints[1].Role)

	o, err = parseFlags([]string{"--config", writeFile(t, "r.yaml", "model: m\n"), "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Nil(t, o.server.Disagg, "no section: one role")

	for content, want := range map[string]string{
		"gateway:\n  disagg: {nonCached: 1}\n":              "gateway.disagg.nonCached: unknown key",
		"gateway:\n  disagg: {maxPrefillQueueTokens: -1}\n": "gateway.disagg",
	} {
		_, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", content), "--endpoints", "10.0.0.1:8000", "--model", "m"}, io.Discard, io.Discard)
		require.ErrorContains(t, err, want, content)
	}
	_, err = parseFlags([]string{"--model", "m", "--endpoints-file", writeFile(t, "bad.json", `[{"id": "10.0.0.1:8000", "role": "prefil"}]`)}, io.Discard, io.Discard)
	require.ErrorContains(t, err, `role "prefil"`)
}

// The disagg block's mode and exchange keys set
// gateway.ServerConfig.DisaggHost beside the decider's keys.
func TestConfigFileDisaggExchangeMode(t *testing.T) {
	cfg := writeFile(t, "gateway.yaml", `
model: m
gateway:
  disagg: {nonCachedTokens: 512, mode: exchange, exchange: {prefillTimeout: 2s, maxPrefillResponseBytes: 4096}}
`)
	o, err := parseFlags([]string{"--config", cfg, "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, &disagg.Config{NonCachedTokens: 512}, o.server.Disagg)
	require.Equal(t, gateway.DisaggHostConfig{Mode: gateway.DisaggModeExchange,
		Exchange: sidecar.Config{PrefillTimeout: 2 * time.Second, MaxPrefillResponseBytes: 4096}}, o.server.DisaggHost)

	// splitAPIs is the profile's: it reaches disagg.Config, in exchange
	// mode as in header mode (the exchange splits every API, Messages
	// too).
	o, err = parseFlags([]string{"--config", writeFile(t, "s.yaml", "model: m\ngateway:\n  disagg: {mode: exchange, splitAPIs: [chat_completions, responses, messages]}\n"),
		"--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, &disagg.Config{SplitAPIs: []render.API{render.APIChatCompletions, render.APIResponses, render.APIMessages}}, o.server.Disagg)
	o, err = parseFlags([]string{"--config", writeFile(t, "h.yaml", "model: m\ngateway:\n  disagg: {splitAPIs: [messages]}\n"),
		"--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err, "header mode: a sidecar that splits Messages")
	require.Equal(t, []render.API{render.APIMessages}, o.server.Disagg.SplitAPIs)

	for content, want := range map[string]string{
		"gateway:\n  disagg: {splitAPIs: [response]}\n":                `splitAPIs[0] "response" is not an API`,
		"gateway:\n  disagg: {splitAPIs: responses}\n":                 "splitAPIs",
		"gateway:\n  disagg: {mode: sidecar}\n":                        `mode "sidecar"`,
		"gateway:\n  disagg: {exchange: {prefillTimeout: 5}}\n":        "duration",
		"gateway:\n  disagg: {exchange: {timeout: 1s}}\n":              "unknown key",
		"gateway:\n  disagg: {exchange: {decoderURL: 'http://x:1'}}\n": "decoderURL",
		"gateway:\n  disagg: {mode: exchange, nonCached: 1}\n":         "unknown key",
	} {
		_, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", content), "--endpoints", "10.0.0.1:8000", "--model", "m"}, io.Discard, io.Discard)
		require.ErrorContains(t, err, want, content)
	}
}
