package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/bench/internal/sim"
)

// TestPeerStatReuse: -peer-stat-reuse takes the named policies' runs from an
// earlier routesim-peers.json (a run repeated gives the same figure, so the
// table is unchanged) and the report says so; a doctored figure shows it
// was taken, not run.
func TestPeerStatReuse(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-requests", "24", "-engines", "2", "-loads", "0.5", "-workloads", "shared-prefix", "-peer-stat-seeds", "2", "-out", dir}
	require.NoError(t, run(context.Background(), args, &bytes.Buffer{}))
	path := filepath.Join(dir, "routesim-peers.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var first struct {
		Base      sim.Config        `json:"base"`
		OverSeeds []sim.PeerSeedRow `json:"overSeeds"`
	}
	require.NoError(t, json.Unmarshal(raw, &first))

	first.OverSeeds[0].TTFTP90[sim.KVRoute][1] = 123 * time.Millisecond
	doctored, err := json.Marshal(first)
	require.NoError(t, err)
	prev := filepath.Join(t.TempDir(), "prev.json")
	require.NoError(t, os.WriteFile(prev, doctored, 0o644))

	again := t.TempDir()
	args[len(args)-1] = again
	args = append(args, "-peer-stat-reuse", prev, "-peer-stat-reuse-policies", "kvroute,dynamo")
	require.NoError(t, run(context.Background(), args, &bytes.Buffer{}))
	raw, err = os.ReadFile(filepath.Join(again, "routesim-peers.json"))
	require.NoError(t, err)
	var second struct {
		OverSeeds []sim.PeerSeedRow `json:"overSeeds"`
	}
	require.NoError(t, json.Unmarshal(raw, &second))
	require.Equal(t, 123*time.Millisecond, second.OverSeeds[0].TTFTP90[sim.KVRoute][1], "taken from the file")
	first.OverSeeds[0].TTFTP90[sim.KVRoute][1] = second.OverSeeds[0].TTFTP90[sim.KVRoute][1]
	require.Equal(t, first.OverSeeds, second.OverSeeds, "the other runs give the same figures again")
	md, err := os.ReadFile(filepath.Join(again, "routesim-peers.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "The runs of kvroute,dynamo were taken from prev.json (4 runs;")

	args = append(args[:len(args)-1], "bogus")
	require.Error(t, run(context.Background(), args, &bytes.Buffer{}))
}
