package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// Two routers given one checkpoint path would each restore the file the
// other last wrote (the other's endpoints, with positions this router
// never read) and overwrite each other's: the second is refused at its
// start, naming the path, before it reads the file, and takes the path
// once the first has closed. The lock file beside the checkpoint is never
// read as a checkpoint, refused or removed.
func TestSecondKeeperOnOnePathIsRefused(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dir := t.TempDir()
	path := filepath.Join(dir, "index.ckpt")
	cfg := Config{Path: path, Interval: -1}
	first := started(t, testBlockSize, cfg, BootstrapConfig{}, nil)
	storeBlocks(t, first.ix, "10.0.0.1:8000", 1, 3, "p1")
	require.NoError(t, first.Write())

	reg := prometheus.NewRegistry()
	ix := newIndex(t, testBlockSize)
	second, err := Restore(t.Context(), ix, cfg, BootstrapConfig{}, Options{Set: telemetry.Set{Registerer: reg, Logger: testLogger(t)}})
	require.ErrorIs(t, err, ErrPathInUse)
	require.Nil(t, second)
	require.Contains(t, err.Error(), path)
	require.Contains(t, err.Error(), "another router")
	require.Zero(t, ix.Stats().Memberships, "the refused router read nothing")
	require.Empty(t, familyNames(t, reg), "the refused router registers nothing")

	first.Close()
	reg = prometheus.NewRegistry()
	third := started(t, testBlockSize, cfg, BootstrapConfig{}, reg)
	require.Equal(t, 1.0, restores(t, reg, "file", "loaded"))
	require.Equal(t, 3, third.ix.Stats().Memberships)
	require.Equal(t, []string{"index.ckpt", "index.ckpt.lock"}, dirNames(t, dir),
		"the lock file is neither refused as a checkpoint nor removed as a leftover")
}

// A Keeper without a checkpoint path claims nothing: any number of them
// run side by side.
func TestKeepersWithoutPathClaimNothing(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	started(t, testBlockSize, Config{}, BootstrapConfig{}, nil)
	started(t, testBlockSize, Config{}, BootstrapConfig{}, nil)
}

// A Restore that fails (its context ended) releases the path it claimed,
// since no Keeper is left to Close.
func TestFailedRestoreReleasesThePath(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	cfg := Config{Path: filepath.Join(t.TempDir(), "index.ckpt"), Interval: -1}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Restore(ctx, newIndex(t, testBlockSize), cfg, BootstrapConfig{}, Options{})
	require.ErrorIs(t, err, context.Canceled)
	started(t, testBlockSize, cfg, BootstrapConfig{}, nil)
}

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names
}

// After Close the path belongs to whichever router claims it next: a late
// Write (a host's Router.Checkpoint racing its own shutdown) fails and
// leaves the next router's checkpoint as it is.
func TestWriteAfterCloseLeavesTheNextRoutersCheckpoint(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dir := t.TempDir()
	path := filepath.Join(dir, "index.ckpt")
	cfg := Config{Path: path, Interval: -1}
	first := started(t, testBlockSize, cfg, BootstrapConfig{}, nil)
	storeBlocks(t, first.ix, "10.0.0.1:8000", 1, 3, "p1")
	first.Close()

	next := started(t, testBlockSize, cfg, BootstrapConfig{}, nil)
	storeBlocks(t, next.ix, "10.0.0.2:8000", 1, 5, "p2")
	require.NoError(t, next.Write())
	want, err := os.ReadFile(path)
	require.NoError(t, err)

	require.ErrorIs(t, first.Write(), errClosed)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, got, "a closed keeper overwrote the next router's checkpoint")
}
