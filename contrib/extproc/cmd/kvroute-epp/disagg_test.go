package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// --disagg-config is read with package disagg's strict rules before the
// picker starts.
func TestDisaggConfigIsCheckedBeforeStarting(t *testing.T) {
	defer leakcheck.Check(t)()
	dir := t.TempDir()
	args := []string{"--endpoints", "127.0.0.1:8000", "--model", model,
		"--listen-host", "127.0.0.1", "--grpc-port", "0", "--grpc-health-port", "0", "--metrics-port", "0"}
	for content, want := range map[string]string{
		"nonCachedTokenz: 10\n":       "nonCachedTokenz",
		"maxPrefillQueueTokens: -1\n": "maxPrefillQueueTokens",
	} {
		bad := filepath.Join(dir, "disagg.yaml")
		require.NoError(t, os.WriteFile(bad, []byte(content), 0o600))
		err := run(context.Background(), append(args, "--disagg-config", bad), io.Discard, io.Discard)
		require.ErrorContains(t, err, want)
	}
	err := run(context.Background(), append(args, "--disagg-config", filepath.Join(dir, "absent.yaml")), io.Discard, io.Discard)
	require.ErrorContains(t, err, "--disagg-config")
}
