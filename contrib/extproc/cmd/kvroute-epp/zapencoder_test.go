package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Inference Extension's picker manifests (its conformance resources)
// start the picker with these arguments; kvroute-epp in its place must
// start with them, not exit on an unknown flag.
func TestFlagsAcceptTheInferenceExtensionManifestArgs(t *testing.T) {
	f, err := parseFlags([]string{"--pool-name", "primary-inference-pool", "--pool-namespace", "inference-conformance-app-backend",
		"--zap-encoder", "json", "--grpc-port", "9002", "--grpc-health-port", "9003"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "json", f.logEncoder)
	require.Equal(t, "primary-inference-pool", f.poolName)

	f, err = parseFlags([]string{"--endpoints", "127.0.0.1:8000"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "console", f.logEncoder, "text lines by default")
	_, err = parseFlags([]string{"--endpoints", "127.0.0.1:8000", "--zap-encoder", "yaml"}, io.Discard)
	require.ErrorContains(t, err, `--zap-encoder "yaml"`)
}

// --zap-encoder json logs one JSON object a line; console logs key=value
// text.
func TestZapEncoderChoosesTheLogFormat(t *testing.T) {
	var b bytes.Buffer
	newLogger(&b, "json", slog.LevelInfo).Info("extproc: ready", "endpoints", 2)
	var rec map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &rec), b.String())
	require.Equal(t, "extproc: ready", rec["msg"])
	require.EqualValues(t, 2, rec["endpoints"])

	b.Reset()
	newLogger(&b, "console", slog.LevelInfo).Info("extproc: ready", "endpoints", 2)
	require.True(t, strings.Contains(b.String(), `msg="extproc: ready" endpoints=2`), b.String())
}
