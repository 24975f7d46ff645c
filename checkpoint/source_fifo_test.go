//go:build unix

package checkpoint

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// silentCheckpoint makes path a FIFO whose writer sends data and then stays
// silent, as a checkpoint file on a hung network mount does: a read of the
// file blocks once data is consumed. The writer is opened read-write, so
// that neither side's open blocks; the test's end closes it, which ends a
// read still blocked.
func silentCheckpoint(t *testing.T, path string, data []byte) {
	t.Helper()
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	w, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	if len(data) > 0 {
		_, err = w.Write(data) // less than a pipe's buffer: does not block
		require.NoError(t, err)
	}
}

// restored is the outcome of a Restore run by restoreAsync.
type restored struct {
	k   *Keeper
	err error
}

// restoreAsync runs Restore on a goroutine and returns its outcome's
// channel.
func restoreAsync(ctx context.Context, t *testing.T, ix *kvindex.Index, cfg Config, boot BootstrapConfig, reg prometheus.Registerer) <-chan restored {
	done := make(chan restored, 1)
	go func() {
		k, err := Restore(ctx, ix, cfg, boot, Options{Set: telemetry.Set{Registerer: reg, Logger: testLogger(t)}})
		done <- restored{k, err}
	}()
	return done
}

// waitRestore returns Restore's outcome, failing the test when it is not
// prompt (a minute: far beyond a prompt return on a loaded machine). The
// test's end closes the Keeper.
func waitRestore(t *testing.T, done <-chan restored) (*Keeper, error) {
	t.Helper()
	select {
	case r := <-done:
		if r.k != nil {
			t.Cleanup(r.k.Close)
		}
		return r.k, r.err
	case <-time.After(time.Minute):
		t.Fatal("Restore still blocked reading the checkpoint file after its context ended")
		return nil, nil
	}
}

// Cancelling Restore's context while a read of the checkpoint file never
// returns (the file's sections read, its trailer never arriving) ends the
// restore at once with the context's error, with the sections already
// loaded rolled back and the goroutine reading the file ended.
func TestFileRestoreAbandonedWhenContextEndsMidRead(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	warm := newIndex(t, testBlockSize)
	storeBlocks(t, warm, "10.0.0.1:8000", 1, 3, "p")
	var full bytes.Buffer
	_, err := warm.WriteSnapshot(&full)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "index.ckpt")
	silentCheckpoint(t, path, full.Bytes()[:full.Len()-1]) // all but the trailer's last byte

	ix := newIndex(t, testBlockSize)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewRegistry()
	done := restoreAsync(ctx, t, ix, Config{Path: path, Interval: -1}, BootstrapConfig{Timeout: testBootstrapTimeout}, reg)
	require.Eventually(t, func() bool { return ix.Stats().Endpoints == 1 }, time.Minute, time.Millisecond,
		"the file's section is loaded, its trailer awaited")
	cancel()
	k, err := waitRestore(t, done)
	require.Nil(t, k)
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, ix.Stats().Endpoints, "an abandoned restore leaves the index empty")
	_, ok := ix.Position("10.0.0.1:8000")
	require.False(t, ok)
	require.Empty(t, familyNames(t, reg), "a failed Restore leaves nothing registered")
	_, err = os.Stat(path + ".rejected")
	require.ErrorIs(t, err, os.ErrNotExist, "an abandoned file is no refused one")
}

// BootstrapConfig.Timeout bounds loading the checkpoint file even when a
// read of it never returns: the file is abandoned, counted as "timeout",
// and the router starts empty.
func TestFileRestoreBoundedByBootstrapTimeout(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	path := filepath.Join(t.TempDir(), "index.ckpt")
	silentCheckpoint(t, path, nil)
	ix := newIndex(t, testBlockSize)
	reg := prometheus.NewRegistry()
	done := restoreAsync(t.Context(), t, ix, Config{Path: path, Interval: -1}, BootstrapConfig{Timeout: 50 * time.Millisecond}, reg)
	_, err := waitRestore(t, done)
	require.NoError(t, err, "a file that times out is no failure of Restore")
	require.Equal(t, 1.0, restores(t, reg, "file", "timeout"))
	require.Zero(t, ix.Stats().Endpoints)
}
