package checkpoint

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
)

// stalledWrite starts k.Write and holds it inside the index's snapshot, at
// endpoint's section, as a slow disk would hold it; it returns once Write
// holds the Keeper's write lock. release lets the write end and returns
// its error.
func stalledWrite(t *testing.T, k *Keeper, endpoint string) (release func() error) {
	t.Helper()
	pl := k.ix.LockPosition(endpoint)
	wrote := make(chan error, 1)
	go func() { wrote <- k.Write() }()
	require.Eventually(t, func() bool {
		if k.mu.TryLock() {
			k.mu.Unlock()
			return false
		}
		return true
	}, time.Minute, time.Millisecond, "Write holds the write lock")
	return func() error {
		pl.Unlock()
		return <-wrote
	}
}

// returnsDuringWrite fails the test unless f returns while a checkpoint
// write is held (a minute: far beyond a call that does not wait).
func returnsDuringWrite(t *testing.T, release func() error, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		f()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		require.NoError(t, release())
		<-done
		t.Fatal("DropUnlisted waited for the checkpoint write in progress")
	}
}

// DropUnlisted, which Router.SetEndpoints calls on every endpoint update,
// never waits for a checkpoint write to end. The first call, racing a write
// held at an endpoint it keeps, drops the unlisted restored endpoint, and
// the write holds the kept one whole and not the dropped one; later calls
// return at once during a write and change nothing.
func TestDropUnlistedDoesNotWaitForCheckpointWrites(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	const kept, dropped = "10.0.0.1:8000", "10.0.0.2:8000" // kept sorts first: the write reaches it first
	path := filepath.Join(t.TempDir(), "index.ckpt")
	cfg := Config{Path: path, Interval: -1}
	k1 := started(t, testBlockSize, cfg, BootstrapConfig{}, nil)
	storeBlocks(t, k1.ix, kept, 1, 3, "p1")
	storeBlocks(t, k1.ix, dropped, 2, 2, "p2")
	k1.Close()
	k := started(t, testBlockSize, cfg, BootstrapConfig{}, nil)
	require.Equal(t, 2, k.ix.Stats().Endpoints)

	release := stalledWrite(t, k, kept)
	returnsDuringWrite(t, release, func() { k.DropUnlisted(func(id string) bool { return id == kept }) })
	_, ok := k.ix.Position(dropped)
	require.False(t, ok, "the first list drops the restored endpoint it does not name")
	require.NoError(t, release())
	written := newIndex(t, testBlockSize)
	info, err := FileSource{Path: path}.Load(context.Background(), written)
	require.NoError(t, err)
	require.Len(t, info.Endpoints, 1, "the write racing the drop holds the kept endpoint only")
	require.Equal(t, kept, info.Endpoints[0].Name)
	require.Equal(t, 3, info.Endpoints[0].Memberships)
	pos, ok := written.Position(kept)
	require.True(t, ok)
	require.Equal(t, "p1", string(pos))

	release = stalledWrite(t, k, kept)
	returnsDuringWrite(t, release, func() { k.DropUnlisted(func(string) bool { return false }) })
	require.NoError(t, release())
	_, ok = k.ix.Position(kept)
	require.True(t, ok, "later lists change nothing")
	require.Equal(t, 3, k.ix.Stats().Memberships)
}
