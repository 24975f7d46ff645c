package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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
	require.Contains(t, string(md), "## Router replicas: local-only accounting vs shared state (shared-prefix, seed 1)")
	require.Contains(t, string(md), "| 1.00 | 2 |")
	raw, err := os.ReadFile(filepath.Join(dir, "routesim-replicas.json"))
	require.NoError(t, err)
	var parsed struct {
		Seeds []struct {
			Seed     uint64 `json:"seed"`
			Replicas []struct {
				Replicas int    `json:"replicas"`
				Mode     string `json:"mode"`
			} `json:"replicas"`
		} `json:"seeds"`
	}
	require.NoError(t, json.Unmarshal(raw, &parsed))
	require.Len(t, parsed.Seeds, 1)
	require.Equal(t, uint64(1), parsed.Seeds[0].Seed, "the default -seed")
	require.Len(t, parsed.Seeds[0].Replicas, 2*3, "per load: R=1, R=2 local-only, R=2 shared")
	_, err = os.Stat(filepath.Join(dir, "routesim.md"))
	require.True(t, os.IsNotExist(err), "the main sweep did not run")

	err = run(context.Background(), []string{"-replica-sweep-only", "-replica-counts", "0", "-out", dir}, &out)
	require.ErrorContains(t, err, "bad replica count")
	err = run(context.Background(), []string{"-replica-sweep-only", "-replica-seeds", "x", "-out", dir}, &out)
	require.ErrorContains(t, err, "bad replica seed")
}

// TestReplicaSweepSeedsAndStatSeeds runs the sweep for two seeds with the
// comparison over three traffic seeds: one section per seed, the per-seed
// summary, and the comparison at the overloaded load only, reusing the
// per-seed runs.
func TestReplicaSweepSeedsAndStatSeeds(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-requests", "60", "-engines", "2", "-loads", "0.5,1.5",
		"-replica-sweep-only", "-replica-counts", "1,2", "-replica-seeds", "1,2", "-replica-stat-seeds", "3",
		"-out", dir, "-parallel", "2"}, &out)
	require.NoError(t, err)
	md, err := os.ReadFile(filepath.Join(dir, "routesim-replicas.md"))
	require.NoError(t, err)
	text := string(md)
	require.Contains(t, text, "-replica-seeds 1,2 -replica-stat-seeds 3", "the header names the command")
	require.Contains(t, text, "| seed | rows met | rows missed |")
	require.Contains(t, text, "(shared-prefix, seed 1)")
	require.Contains(t, text, "(shared-prefix, seed 2)")
	require.Equal(t, 1, strings.Count(text, "## Router replicas over 3 traffic seeds"))
	sec := text[strings.Index(text, "## Router replicas over 3 traffic seeds"):]
	sec = sec[:strings.Index(sec, "\n## ")]
	require.Contains(t, sec, "| 1.50 | 2 |")
	require.NotContains(t, sec, "| 0.50 |", "only the loads above 1")
	raw, err := os.ReadFile(filepath.Join(dir, "routesim-replicas.json"))
	require.NoError(t, err)
	var parsed struct {
		Seeds []struct {
			Replicas []struct {
				Replicas int    `json:"replicas"`
				Mode     string `json:"mode"`
				Result   struct {
					Load    float64 `json:"load"`
					TTFTP90 int64   `json:"ttftP90"`
				} `json:"result"`
			} `json:"replicas"`
		} `json:"seeds"`
		OverSeeds []struct {
			Load     float64  `json:"load"`
			Replicas int      `json:"replicas"`
			Seeds    []uint64 `json:"seeds"`
			Single   []int64  `json:"single"`
			Shared   []int64  `json:"shared"`
		} `json:"overSeeds"`
	}
	require.NoError(t, json.Unmarshal(raw, &parsed))
	require.Len(t, parsed.Seeds, 2)
	require.Len(t, parsed.OverSeeds, 2, "R = 1 and R = 2 at load 1.5")
	for _, r := range parsed.OverSeeds {
		require.Equal(t, 1.5, r.Load)
		require.Equal(t, []uint64{1, 2, 3}, r.Seeds)
		require.Len(t, r.Single, 3)
		require.Len(t, r.Shared, 3)
	}
	for si, s := range parsed.Seeds { // seeds 1 and 2's sweeps are the comparison's first two pairs
		for _, rr := range s.Replicas {
			if rr.Result.Load == 1.5 && rr.Replicas == 2 && rr.Mode == "shared" {
				require.Equal(t, rr.Result.TTFTP90, parsed.OverSeeds[1].Shared[si])
			}
			if rr.Result.Load == 1.5 && rr.Replicas == 1 {
				require.Equal(t, rr.Result.TTFTP90, parsed.OverSeeds[1].Single[si])
			}
		}
	}
}

// TestPeerStatSeeds runs only the comparison with the peers over seeds, at
// the loads of at least half capacity, into its own files.
func TestPeerStatSeeds(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-requests", "40", "-engines", "2", "-loads", "0.25,1.5",
		"-workloads", "no-reuse", "-peer-stat-seeds", "2", "-out", dir, "-parallel", "2"}, &out)
	require.NoError(t, err)
	md, err := os.ReadFile(filepath.Join(dir, "routesim-peers.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "## kvroute against the peers' policies over 2 traffic seeds")
	require.Contains(t, string(md), "| no-reuse | 1.50 |")
	require.NotContains(t, string(md), "| no-reuse | 0.25 |", "only loads ≥ 0.5")
	_, err = os.Stat(filepath.Join(dir, "routesim-peers.json"))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "routesim.md"))
	require.True(t, os.IsNotExist(err), "the main sweep did not run")
	err = run(context.Background(), []string{"-loads", "0.25", "-peer-stat-seeds", "2", "-out", dir}, &out)
	require.ErrorContains(t, err, "no load")
}
