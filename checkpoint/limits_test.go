package checkpoint

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvindex"
)

// Zero limits mean the defaults.
func TestBootstrapLimitDefaults(t *testing.T) {
	require.Equal(t, DefaultBootstrapProgressTimeout, PeerSource{}.progressTimeout())
	require.EqualValues(t, kvindex.DefaultMaxSnapshotSectionBytes, DefaultMaxSectionBytes)
}

// bootstrap.maxSectionBytes bounds the sections of the checkpoint file and
// of a peer's snapshot: a larger section is refused as too_large (the file
// kept as .rejected), and the default loads it.
func TestBootstrapMaxSectionBytesBoundsFileAndPeer(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	path := filepath.Join(t.TempDir(), "index.ckpt")
	cfg := Config{Path: path, Interval: -1}
	k := started(t, testBlockSize, cfg, BootstrapConfig{}, nil)
	storeBlocks(t, k.ix, "10.0.0.1:8000", 3, 6, "p1")
	k.Close()

	reg := prometheus.NewRegistry()
	small := started(t, testBlockSize, cfg, BootstrapConfig{MaxSectionBytes: 64}, reg)
	require.Equal(t, 1.0, restores(t, reg, "file", kvindex.SnapshotReasonTooLarge))
	require.Zero(t, small.ix.Stats().Memberships)
	small.cfg.Path = "" // keep the file's name free for the next keeper
	small.Close()
	require.NoError(t, os.Rename(path+".rejected", path))

	reg = prometheus.NewRegistry()
	def := started(t, testBlockSize, cfg, BootstrapConfig{}, reg)
	require.Equal(t, 1.0, restores(t, reg, "file", "loaded"))
	require.Equal(t, 6, def.ix.Stats().Memberships)
	def.Close()

	_, good := peer(t, "", 0)
	reg = prometheus.NewRegistry()
	p := boot(t, reg, BootstrapConfig{Peers: []string{good.URL}, MaxSectionBytes: 64})
	require.Equal(t, 1.0, restores(t, reg, "peer", kvindex.SnapshotReasonTooLarge))
	require.Zero(t, p.ix.Stats().Memberships)
}

// bootstrap.maxEndpoints bounds the endpoint sections of the checkpoint
// file and of a peer's snapshot: one with more is refused as too_large (the
// file kept as .rejected), and the default loads it.
func TestBootstrapMaxEndpointsBoundsFileAndPeer(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	require.EqualValues(t, kvindex.DefaultMaxSnapshotEndpoints, DefaultMaxEndpoints)
	path := filepath.Join(t.TempDir(), "index.ckpt")
	cfg := Config{Path: path, Interval: -1}
	k := started(t, testBlockSize, cfg, BootstrapConfig{}, nil)
	storeBlocks(t, k.ix, "10.0.0.1:8000", 3, 6, "p1")
	storeBlocks(t, k.ix, "10.0.0.2:8000", 4, 2, "p2")
	k.Close()

	reg := prometheus.NewRegistry()
	small := started(t, testBlockSize, cfg, BootstrapConfig{MaxEndpoints: 1}, reg)
	require.Equal(t, 1.0, restores(t, reg, "file", kvindex.SnapshotReasonTooLarge))
	require.Zero(t, small.ix.Stats().Memberships)
	small.cfg.Path = "" // keep the file's name free for the next keeper
	small.Close()
	require.NoError(t, os.Rename(path+".rejected", path))

	reg = prometheus.NewRegistry()
	def := started(t, testBlockSize, cfg, BootstrapConfig{}, reg)
	require.Equal(t, 1.0, restores(t, reg, "file", "loaded"))
	require.Equal(t, 8, def.ix.Stats().Memberships)
	def.Close()

	srv, good := peer(t, "", 0)
	storeBlocks(t, srv.ix, "10.0.0.9:8000", 5, 1, "p9") // a second endpoint
	reg = prometheus.NewRegistry()
	p := boot(t, reg, BootstrapConfig{Peers: []string{good.URL}, MaxEndpoints: 1})
	require.Equal(t, 1.0, restores(t, reg, "peer", kvindex.SnapshotReasonTooLarge))
	require.Zero(t, p.ix.Stats().Memberships)

	require.ErrorContains(t, BootstrapConfig{MaxEndpoints: -1}.Validate(), "maxEndpoints")
}
