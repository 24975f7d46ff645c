package gatewaycmd

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/approx"
)

func TestConfigFileApproximateSection(t *testing.T) {
	cfg := writeFile(t, "gateway.yaml", `
model: m
gateway:
  approximate:
    enabled: true
    ttl: 5m
    capacity: {gpuBlocks: 1000, cpuBlocks: 3000, blockSize: 16}
    endpoints:
      10.0.0.1:8000: {gpuBlocks: 2000, blockSize: 32}
    maxBytes: 1048576
    capacityFrom: config
`)
	o, err := parseFlags([]string{"--config", cfg, "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Equal(t, &approx.Config{Enabled: true, TTL: 5 * time.Minute,
		Capacity:  approx.Capacity{GPUBlocks: 1000, CPUBlocks: 3000, BlockSize: 16},
		Endpoints: map[string]approx.Capacity{"10.0.0.1:8000": {GPUBlocks: 2000, BlockSize: 32}},
		MaxBytes:  1 << 20, CapacityFrom: approx.CapacityFromConfig}, o.server.Approximate)

	for content, want := range map[string]string{
		"gateway:\n  approximate:\n    ttl: 30\n":                         "gateway.approximate.ttl: bare number 30 is not a duration",
		"gateway:\n  approximate:\n    enable: true\n":                    "gateway.approximate.enable: unknown key",
		"gateway:\n  approximate:\n    capacity: {cpuBlocks: 4}\n":        "gateway.approximate: approx: capacity: cpuBlocks without gpuBlocks",
		"gateway:\n  approximate:\n    endpoints: {a: {gpuBlocks: -1}}\n": "gateway.approximate",
		"gateway:\n  approximate:\n    capacityFrom: prometheus\n":        "gateway.approximate: approx: capacityFrom must be",
	} {
		_, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", content), "--endpoints", "10.0.0.1:8000", "--model", "m"}, io.Discard, io.Discard)
		require.ErrorContains(t, err, want, content)
	}
}

// engineMetrics with an approximate index that reads its capacities from
// the engines is valid alone: the scraper built with its settings feeds
// the capacities (gateway.ServerConfig.Approximate), as the README's
// capacity source says. With capacityFrom "config" nothing reads it.
func TestConfigFileEngineMetricsFeedsTheApproximateCapacities(t *testing.T) {
	cfg := writeFile(t, "gateway.yaml", `
model: m
gateway:
  approximate: {enabled: true}
  engineMetrics: {interval: 1s, staleness: 4s}
`)
	o, err := parseFlags([]string{"--config", cfg, "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.NotNil(t, o.server.EngineMetrics)
	require.Equal(t, time.Second, o.server.EngineMetrics.Interval)

	for _, content := range []string{
		"gateway:\n  approximate: {enabled: true, capacityFrom: config}\n  engineMetrics: {}\n",
		"gateway:\n  approximate: {capacityFrom: engine}\n  engineMetrics: {}\n",
	} {
		_, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", content), "--endpoints", "10.0.0.1:8000", "--model", "m"}, io.Discard, io.Discard)
		require.ErrorContains(t, err, "gateway.engineMetrics: feeds", content)
	}
}
