package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeTrace writes a small trace in the Mooncake format: n requests, 100 ms
// apart, over three shared two-block prefixes plus one block of their own.
func writeTrace(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		g := int64(i % 3)
		ids := []int64{2 * g, 2*g + 1, 100 + int64(i)}
		line, err := json.Marshal(map[string]any{"timestamp": 100 * i, "input_length": 2*512 + 200, "output_length": 1 + i%7, "hash_ids": ids})
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

// TestRoutesimTrace replays a trace window end to end: its report states the
// trace, the window and the working set against the fleet's cache.
func TestRoutesimTrace(t *testing.T) {
	path := writeTrace(t, 30)
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-trace", path, "-trace-start", "5", "-trace-requests", "20", "-engines", "2",
		"-loads", "0.5", "-policies", "kvroute,dynamo,lmetric", "-out", dir, "-parallel", "2"}, &out)
	require.NoError(t, err)
	require.Contains(t, out.String(), "trace load 0.50: kvroute hit")
	md, err := os.ReadFile(filepath.Join(dir, "routesim-trace.md"))
	require.NoError(t, err)
	for _, want := range []string{"# Routing-quality simulation", "## trace", "Mooncake trace trace.jsonl, requests 6–25 of 30 (a contiguous window)",
		"working set", "× the fleet's cache", "2 engines × 7,168 blocks", "routesim-trace.svg", "| 0.50 |"} {
		require.Contains(t, string(md), want)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "routesim-trace.json"))
	require.NoError(t, err)
	var parsed struct {
		Results []map[string]any `json:"results"`
		Trace   map[string]any   `json:"trace"`
	}
	require.NoError(t, json.Unmarshal(raw, &parsed))
	require.Len(t, parsed.Results, 3)
	require.Equal(t, 30.0, parsed.Trace["total"])

	// Over seeds, into its own file.
	err = run(context.Background(), []string{"-trace", path, "-engines", "2", "-loads", "0.25,0.5", "-peer-stat-seeds", "2", "-out", dir}, &out)
	require.NoError(t, err)
	md, err = os.ReadFile(filepath.Join(dir, "routesim-trace-peers.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "| trace | 0.50 |")
	require.Contains(t, string(md), "Mooncake trace trace.jsonl, all 30 requests")
}

// TestRoutesimTraceErrors: a bad trace names its file and line; a request
// too long for an engine names the flag that fixes it.
func TestRoutesimTraceErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(`{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}`+"\n{}\n"), 0o644))
	err := run(context.Background(), []string{"-trace", bad, "-out", t.TempDir()}, &bytes.Buffer{})
	require.ErrorContains(t, err, fmt.Sprintf("%s: sim: bad mooncake trace: line 2: missing key", bad))
	err = run(context.Background(), []string{"-trace", writeTrace(t, 5), "-blocks", "8", "-out", t.TempDir()}, &bytes.Buffer{})
	require.ErrorContains(t, err, "raise -blocks")
	err = run(context.Background(), []string{"-trace", filepath.Join(t.TempDir(), "missing.jsonl"), "-out", t.TempDir()}, &bytes.Buffer{})
	require.Error(t, err)
}
