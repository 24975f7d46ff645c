package gatewaycmd

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// The engineMetrics section is checked where the file is read, by its
// path, as every other section of the gateway's is: it was checked first
// when the scraper started, so that the file loaded and the gateway then
// failed with "enginemetrics: interval 1s is not shorter than staleness
// 200ms", naming no section.
func TestConfigFileEngineMetricsIsValidatedWhereRead(t *testing.T) {
	for content, want := range map[string]string{
		"gateway:\n  admission: {}\n  engineMetrics: {interval: -1s}\n":       "gateway.engineMetrics: enginemetrics: interval -1s is negative",
		"gateway:\n  admission: {}\n  engineMetrics: {interval: 1s}\n":        "gateway.engineMetrics: enginemetrics: interval 1s is not shorter than staleness 200ms",
		"gateway:\n  lora: {}\n  engineMetrics: {kvCacheThreshold: 1.5}\n":    "gateway.engineMetrics: enginemetrics: kvCacheThreshold 1.5 is not at most 1",
		"gateway:\n  peerLoadFromMetrics: true\n  engineMetrics: {path: x}\n": `gateway.engineMetrics: enginemetrics: path "x" does not start with /`,
	} {
		_, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", content), "--endpoints", "10.0.0.1:8000", "--model", "m"}, io.Discard, io.Discard)
		require.ErrorContains(t, err, want, content)
	}
	_, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", "gateway:\n  admission: {}\n  engineMetrics: {interval: 1s, staleness: 4s}\n"),
		"--endpoints", "10.0.0.1:8000", "--model", "m"}, io.Discard, io.Discard)
	require.NoError(t, err)
}
