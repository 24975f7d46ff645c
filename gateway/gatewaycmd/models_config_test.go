package gatewaycmd

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestModelsBlockFromTheConfigFile(t *testing.T) {
	cfg := writeFile(t, "gateway.yaml", `model: alpha
gateway:
  models:
    served: {"10.0.0.1:8000": [beta]}
    poll: {enabled: true, interval: 10s}
    rewrites:
      - model: canary
        targets: [{model: alpha, weight: 9}, {model: beta, weight: 1}]
`)
	o, err := parseFlags([]string{"--config", cfg, "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.NotNil(t, o.server.Models)
	require.Equal(t, []string{"beta"}, o.server.Models.Served["10.0.0.1:8000"])
	require.Equal(t, 10*time.Second, o.server.Models.Poll.Interval)
	require.Len(t, o.server.Models.Rewrites[0].Targets, 2)

	o, err = parseFlags([]string{"--model", "m", "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Nil(t, o.server.Models, "absent: one model")

	for _, bad := range []string{
		"model: m\ngateway:\n  models: {labelx: a}\n",
		"model: m\ngateway:\n  models: {poll: {interval: 5}}\n",
		"model: m\ngateway:\n  models: {rewrites: [{model: a, targets: []}]}\n",
	} {
		_, err := parseFlags([]string{"--config", writeFile(t, "bad.yaml", bad), "--endpoints", "10.0.0.1:8000"}, io.Discard, io.Discard)
		require.Error(t, err, bad)
	}
}
