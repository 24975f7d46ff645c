package gatewaycmd

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfigFileLoRASection(t *testing.T) {
	cfg := writeFile(t, "gateway.yaml", `
model: m
gateway:
  lora: {weight: 2, capPenalty: 0.2, maxWaiting: 8}
  engineMetrics: {interval: 100ms}
`)
	o, err := parseFlags([]string{"--config", cfg, "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	l := o.server.LoRA
	require.NotNil(t, l)
	require.Equal(t, 2.0, l.Weight)
	require.Equal(t, 0.2, l.CapPenalty)
	require.Equal(t, 8, l.MaxWaiting)
	require.NotNil(t, o.server.EngineMetrics, "engineMetrics with lora alone is valid: it feeds the scorer")
	require.Equal(t, 100*time.Millisecond, o.server.EngineMetrics.Interval)
	require.Nil(t, o.server.Admission)

	o, err = parseFlags([]string{"--config", writeFile(t, "l.yaml", "model: m\ngateway:\n  lora: {}\n"), "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.NotNil(t, o.server.LoRA, "an empty section turns the scorer on with its defaults")

	for content, want := range map[string]string{
		"gateway:\n  lora: {wieght: 1}\n":       "gateway.lora.wieght: unknown key",
		"gateway:\n  lora: {weight: -1}\n":      "gateway.lora",
		"gateway:\n  lora: {capPenalty: 0.9}\n": "capPenalty",
	} {
		_, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", content), "--endpoints", "10.0.0.1:8000", "--model", "m"}, io.Discard, io.Discard)
		require.ErrorContains(t, err, want, content)
	}
}
