package gatewaycmd

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfigFilePeerLoadFromMetrics(t *testing.T) {
	cfg := writeFile(t, "gateway.yaml", `
model: m
gateway:
  peerLoadFromMetrics: true
  engineMetrics: {interval: 100ms}
`)
	o, err := parseFlags([]string{"--config", cfg, "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.True(t, o.server.PeerLoadFromMetrics)
	require.NotNil(t, o.server.EngineMetrics, "engineMetrics with peerLoadFromMetrics alone is valid: it feeds the estimate")
	require.Equal(t, 100*time.Millisecond, o.server.EngineMetrics.Interval)

	o, err = parseFlags([]string{"--config", writeFile(t, "d.yaml", "model: m\n"), "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.False(t, o.server.PeerLoadFromMetrics, "off by default")

	_, err = parseFlags([]string{"--config", writeFile(t, "c.yaml", "gateway:\n  peerLoadFromMetrics: yes please\n"), "--endpoints", "10.0.0.1:8000", "--model", "m"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "peerLoadFromMetrics")
}
