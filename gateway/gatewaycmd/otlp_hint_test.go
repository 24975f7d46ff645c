package gatewaycmd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/syncbuf"
)

// runUntilServing runs the gateway until it serves, stops it and returns
// what it logged.
func runUntilServing(t *testing.T, opts Options) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"--listen", "127.0.0.1:0", "--endpoints", "127.0.0.1:9", "--policy", "round-robin"}, &stdout, &stderr, opts)
	}()
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "serving on") }, 10*time.Second, 5*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	return stderr.String()
}

// A gateway that cannot export says so once when the environment asks for
// OTLP, naming the binary that does; it is silent otherwise.
func TestRunNamesTheOTLPBinaryWhenTheEnvironmentAsksForExport(t *testing.T) {
	defer leakcheck.Check(t)()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	require.NotContains(t, runUntilServing(t, Options{OTLPBinary: "kvroute-gateway"}), "OTLP")

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	logs := runUntilServing(t, Options{OTLPBinary: "kvroute-gateway"})
	require.Equal(t, 1, strings.Count(logs, "does not export OTLP"), logs)
	require.Contains(t, logs, "kvroute-gateway")

	require.NotContains(t, runUntilServing(t, Options{}), "OTLP", "a binary that exports (no OTLPBinary) says nothing")
}

func TestOTLPRequestedBySignalSpecificEndpoint(t *testing.T) {
	env := map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}
	require.True(t, otlpRequested(func(k string) string { return env[k] }))
	require.False(t, otlpRequested(func(string) string { return "" }))
}

// An environment that names an endpoint but turns export off
// (OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none, in any case, as the
// OTLP build reads them) does not ask for OTLP export, so the gateway does
// not tell the operator to run the build that exports.
func TestOTLPNotRequestedWhenTheEnvironmentTurnsExportOff(t *testing.T) {
	for _, off := range []map[string]string{
		{"OTEL_SDK_DISABLED": "true"},
		{"OTEL_SDK_DISABLED": "TRUE"},
		{"OTEL_TRACES_EXPORTER": "none"},
		{"OTEL_TRACES_EXPORTER": " None "},
	} {
		env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
		for k, v := range off {
			env[k] = v
		}
		require.False(t, otlpRequested(func(k string) string { return env[k] }), "%v", off)
	}
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}
	require.True(t, otlpRequested(func(k string) string { return env[k] }))
}
