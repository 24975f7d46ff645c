package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/e2e"
)

// TestMain lets the test binary serve as the --replicas demo's child
// gateway, as the demo binary itself does.
func TestMain(m *testing.M) {
	if e2e.RunReplicaGatewayChild() {
		return
	}
	os.Exit(m.Run())
}

func TestReplicasFlag(t *testing.T) {
	_, err := parseFlags([]string{"--replicas", "3"}, io.Discard)
	require.ErrorContains(t, err, "--replicas must be 1 or 2")
	_, err = parseFlags([]string{"--replicas", "2"}, io.Discard)
	require.NoError(t, err)
	replicas = 1
}

// TestReplicasWithoutRedisServer: --replicas 2 without redis-server on PATH
// fails with a message that says what to install.
func TestReplicasWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	defer func() { replicas = 1 }()
	err := run(context.Background(), []string{"--replicas", "2", "--fast"}, io.Discard, io.Discard)
	require.ErrorIs(t, err, e2e.ErrNoRedis)
	require.ErrorContains(t, err, "redis-server on PATH")
}

// TestReplicasDemo runs `demo --replicas 2 --fast` end to end.
func TestReplicasDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the replicas demo")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("KVROUTE_REQUIRE_REDIS") == "1" {
			t.Fatalf("KVROUTE_REQUIRE_REDIS=1 but: %v", err)
		}
		t.Skipf("redis-server not on PATH: %v", err)
	}
	defer func() { replicas = 1 }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"--replicas", "2", "--fast"}, &out, io.Discard), out.String())
	require.Contains(t, out.String(), "PASS: gw-1 carries on alone")
}
