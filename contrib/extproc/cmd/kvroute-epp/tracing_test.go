package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// --tracing, which llm-d's router chart passes as --tracing=true or
// --tracing=false, is accepted and checked as a boolean; kvroute-epp
// emits no traces, so --tracing=true is logged once at start with why and
// --tracing=false, or no --tracing, logs nothing.
func TestTracingFlag(t *testing.T) {
	for _, args := range [][]string{{"--tracing=maybe"}, {"--tracing="}} {
		_, err := parseFlags(append([]string{"--pool-name", "p"}, args...), io.Discard)
		require.ErrorContains(t, err, "tracing", args)
	}
	f, err := parseFlags([]string{"--pool-name", "p"}, io.Discard)
	require.NoError(t, err)
	require.True(t, f.tracing.on, "llm-d's default")
	require.False(t, f.tracing.given)

	t.Cleanup(leakcheck.Check(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // run starts, then stops at once
	for args, logged := range map[string]int{"--tracing": 1, "--tracing=true": 1, "--tracing=false": 0, "": 0} {
		var stderr bytes.Buffer
		runArgs := []string{"--endpoints", "127.0.0.1:1", "--model", model, "--config-text", "events:\n  enabled: false\n",
			"--listen-host", "127.0.0.1", "--grpc-port", "0", "--grpc-health-port", "0", "--metrics-port", "0", "--drain-timeout=0"}
		if args != "" {
			runArgs = append(runArgs, args)
		}
		require.NoError(t, run(ctx, runArgs, io.Discard, &stderr), args)
		require.Equal(t, logged, strings.Count(stderr.String(), "flag=--tracing "), args+": "+stderr.String())
		if logged > 0 {
			require.Contains(t, stderr.String(), "kvroute-epp emits no traces")
		}
	}
}
