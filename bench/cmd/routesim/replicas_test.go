package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReplicaSweepOnly runs the router-replica sweep alone, small, and
// checks its report and JSON.
func TestReplicaSweepOnly(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-requests", "60", "-engines", "2", "-loads", "0.5,1",
		"-replica-sweep-only", "-replica-counts", "1,2", "-out", dir, "-parallel", "2"}, &out)
	require.NoError(t, err)
	require.Contains(t, out.String(), "replicas 2 load 1.00: TTFT p90 local-only")
	md, err := os.ReadFile(filepath.Join(dir, "routesim-replicas.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "## Router replicas: local-only accounting vs shared state (shared-prefix)")
	require.Contains(t, string(md), "| 1.00 | 2 |")
	raw, err := os.ReadFile(filepath.Join(dir, "routesim-replicas.json"))
	require.NoError(t, err)
	var parsed struct {
		Replicas []struct {
			Replicas int    `json:"replicas"`
			Mode     string `json:"mode"`
		} `json:"replicas"`
	}
	require.NoError(t, json.Unmarshal(raw, &parsed))
	require.Len(t, parsed.Replicas, 2*3, "per load: R=1, R=2 local-only, R=2 shared")
	_, err = os.Stat(filepath.Join(dir, "routesim.md"))
	require.True(t, os.IsNotExist(err), "the main sweep did not run")

	err = run(context.Background(), []string{"-replica-sweep-only", "-replica-counts", "0", "-out", dir}, &out)
	require.ErrorContains(t, err, "bad replica count")
}
