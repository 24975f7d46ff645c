package gatewaycmd

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/admission"
)

func TestConfigFileAdmissionSection(t *testing.T) {
	cfg := writeFile(t, "gateway.yaml", `
model: m
gateway:
  admission:
    objectives:
      - {name: chat, priority: 1, queueTimeout: 5s}
      - {name: batch, priority: -1}
    fairness: deficit_round_robin
    saturation: {maxPrefillBacklog: 1500ms, maxOpenRequests: 8}
  engineMetrics: {interval: 100ms, waitingThreshold: 3}
`)
	o, err := parseFlags([]string{"--config", cfg, "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	a := o.server.Admission
	require.NotNil(t, a)
	require.Equal(t, []admission.Objective{{Name: "chat", Priority: 1, QueueTimeout: 5 * time.Second}, {Name: "batch", Priority: -1}}, a.Objectives)
	require.Equal(t, admission.DeficitRoundRobin, a.Fairness)
	require.Equal(t, 1500*time.Millisecond, a.Saturation.MaxPrefillBacklog)
	require.Equal(t, int64(8), a.Saturation.MaxOpenRequests)
	require.NotNil(t, o.server.EngineMetrics)
	require.Equal(t, 100*time.Millisecond, o.server.EngineMetrics.Interval)
	require.Equal(t, 3, o.server.EngineMetrics.WaitingThreshold)

	o, err = parseFlags([]string{"--config", writeFile(t, "r.yaml", "model: m\n"), "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Nil(t, o.server.Admission, "no section: no admission")

	for content, want := range map[string]string{
		"gateway:\n  admission:\n    queueTimeout: 30\n":              "gateway.admission.queueTimeout: bare number 30 is not a duration",
		"gateway:\n  admission:\n    objectivs: []\n":                 "gateway.admission.objectivs: unknown key",
		"gateway:\n  admission:\n    fairness: lottery\n":             "gateway.admission",
		"gateway:\n  admission:\n    saturation: {maxOpen: 1}\n":      "gateway.admission.saturation.maxOpen: unknown key",
		"gateway:\n  engineMetrics: {}\n":                             "gateway.engineMetrics: feeds the admission stage",
		"gateway:\n  admission: {}\n  engineMetrics: {intervl: 1s}\n": "gateway.engineMetrics.intervl: unknown key",
	} {
		_, err := parseFlags([]string{"--config", writeFile(t, "c.yaml", content), "--endpoints", "10.0.0.1:8000", "--model", "m"}, io.Discard, io.Discard)
		require.ErrorContains(t, err, want, content)
	}
}
