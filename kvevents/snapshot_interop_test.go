package kvevents

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/pytest"
	"github.com/kvroute/kvroute/kvevents/snapshot"
)

// A vLLM-like engine on real libzmq (testdata/vllm_snapshot_server.py,
// written from vLLM's snapshot recorder's wire format) has published
// batches 0..99 before the router subscribes, keeps publishing, and
// answers its first two snapshot requests "unavailable". The router joins
// mid-stream with no replay at all: it retries the snapshot, loads it (in
// vLLM's export shape: teaching stores, token-less residency stores,
// removal of the teaching stores) and indexes every batch, the ones before
// it joined included, then follows the live stream after the snapshot's
// sequence.
func TestSnapshotInteropWithLibzmqEngine(t *testing.T) {
	pytest.Require(t)
	defer leakcheck.Check(t)()
	script := filepath.Join(filepath.Dir(pytest.ScriptPath()), "vllm_snapshot_server.py")
	cmd := exec.Command(pytest.Python, script, "--snapshot-seq", "99", "--unavailable", "2")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "the script prints its endpoints")
	var eps struct{ Pub, Snapshot, PublisherID string }
	require.NoError(t, json.Unmarshal(lines.Bytes(), &eps))

	ix := newPoolIndex(t)
	p, logs := newTestPool(t, PoolConfig{Snapshot: SnapshotConfig{Client: snapshot.ClientConfig{Backoff: 20e6}}}, ix)
	const id = "127.0.0.1:8000"
	require.NoError(t, p.Ensure(Endpoint{ID: id, Model: poolModel, EventsAddress: eps.Pub, SnapshotAddress: eps.Snapshot}))
	waitAppliedLogs(t, p, id, 105, logs)
	requireHeldLogs(t, ix, id, 0, 105, logs)
	st, _ := p.Status(id)
	require.Equal(t, sourceSnapshot, st.IndexSource)
	require.Equal(t, eps.Snapshot, st.Snapshot)
	require.Equal(t, 2.0, counter(p.snm.errors, id, snapshot.OpUnavailable), logs.String())
	require.Equal(t, 1.0, counter(p.snm.loads, id, snapLoaded), logs.String())
	require.NoError(t, p.Close())

	require.NoError(t, stdin.Close())
	require.True(t, lines.Scan(), "the script prints its counters")
	var stats struct{ Requests, Unavailable int }
	require.NoError(t, json.Unmarshal(lines.Bytes(), &stats))
	require.Equal(t, 3, stats.Requests)
	require.Equal(t, 2, stats.Unavailable)
	require.NoError(t, cmd.Wait())
}
