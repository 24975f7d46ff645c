package checkpoint

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/telemetry"
)

// A directory sync that fails after the rename leaves the new checkpoint in
// place: Write's error, its log line and its metric say so (not_durable),
// rather than that the write failed and the previous checkpoint was kept;
// the file holds the new checkpoint, whole, and the next start loads it.
func TestDirectorySyncFailureAfterRenameIsNotDurable(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	path := filepath.Join(t.TempDir(), "index.ckpt")
	cfg := Config{Path: path, Interval: -1}
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	k, err := Restore(t.Context(), newIndex(t, testBlockSize), cfg, BootstrapConfig{},
		Options{Set: telemetry.Set{Registerer: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	require.NoError(t, err)
	t.Cleanup(k.Close)
	storeBlocks(t, k.ix, "10.0.0.1:8000", 1, 2, "p1")
	require.NoError(t, k.Write())
	previous, err := os.ReadFile(path)
	require.NoError(t, err)

	storeBlocks(t, k.ix, "10.0.0.2:8000", 2, 3, "p2")
	injected := errors.New("injected: directory fsync failed")
	syncDir = func(string) error { return injected }
	t.Cleanup(func() { syncDir = defaultSyncDir })
	err = k.Write()
	require.ErrorIs(t, err, injected)
	require.ErrorIs(t, err, errNotDurable)
	require.Contains(t, err.Error(), "the new checkpoint is in place")
	require.NotContains(t, logs.String(), "previous checkpoint is kept")
	require.Contains(t, logs.String(), "the new checkpoint is in place")
	require.Equal(t, 1.0, testutil.ToFloat64(k.met.writes.WithLabelValues("not_durable")))
	require.Zero(t, testutil.ToFloat64(k.met.writes.WithLabelValues("error")))

	current, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotEqual(t, previous, current, "the file is the new checkpoint")
	require.Equal(t, float64(len(current)), testutil.ToFloat64(k.met.bytes))
	require.Equal(t, []string{"index.ckpt", "index.ckpt.lock"}, dirNames(t, filepath.Dir(path)), "no temporary file left behind")
	syncDir = defaultSyncDir
	k.Close()

	k2 := started(t, testBlockSize, cfg, BootstrapConfig{}, prometheus.NewRegistry())
	require.Equal(t, 5, k2.ix.Stats().Memberships, "the new checkpoint loads")
}
