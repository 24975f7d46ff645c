package kvroute

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvindex"
)

// bootstrap.progressTimeout and bootstrap.maxSectionBytes are read by the
// strict decoder (a duration string, a byte count), zero means the
// defaults, and negative values are refused.
func TestBootstrapLimitKeys(t *testing.T) {
	got, err := LoadConfig(strings.NewReader(`{"bootstrap":{"progressTimeout":"750ms","maxSectionBytes":1048576}}`))
	require.NoError(t, err)
	require.Equal(t, 750*time.Millisecond, got.Bootstrap.ProgressTimeout)
	require.EqualValues(t, 1<<20, got.Bootstrap.MaxSectionBytes)
	data, err := json.Marshal(got)
	require.NoError(t, err)
	require.Contains(t, string(data), `"progressTimeout":"750ms"`)
	require.Contains(t, string(data), `"maxSectionBytes":1048576`)

	def := DefaultConfig()
	require.Zero(t, def.Bootstrap.ProgressTimeout, "zero: DefaultBootstrapProgressTimeout")
	require.Zero(t, def.Bootstrap.MaxSectionBytes, "zero: DefaultMaxSnapshotSectionBytes")
	require.Equal(t, DefaultBootstrapProgressTimeout, PeerSource{}.progressTimeout())

	for in, want := range map[string]string{
		`{"bootstrap":{"progressTimeout":5}}`:         "bootstrap.progressTimeout",
		`{"bootstrap":{"progressTimeout":"-1s"}}`:     "bootstrap.progressTimeout",
		`{"bootstrap":{"maxSectionBytes":-1}}`:        "bootstrap.maxSectionBytes",
		`{"bootstrap":{"maxSectionBytes":"1MiB"}}`:    "bootstrap.maxSectionBytes",
		`{"bootstrap":{"max_section_bytes":1048576}}`: "bootstrap.max_section_bytes",
	} {
		_, err := LoadConfig(strings.NewReader(in))
		require.ErrorIs(t, err, ErrInvalidConfig, in)
		require.ErrorContains(t, err, want, in)
	}
}

// bootstrap.maxSectionBytes bounds the sections of the checkpoint file and
// of a peer's snapshot: a larger section is refused as too_large (the file
// kept as .rejected), and the default loads it.
func TestBootstrapMaxSectionBytesBoundsFileAndPeer(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	path := filepath.Join(t.TempDir(), "index.ckpt")
	r := ckptRouter(t, path, nil, nil)
	storeBlocks(t, r.Index(), "10.0.0.1:8000", 3, 6, "p1")
	r.Close()

	reg := prometheus.NewRegistry()
	small := ckptRouter(t, path, reg, func(c *Config) { c.Bootstrap.MaxSectionBytes = 64 })
	require.Equal(t, 1.0, restores(t, reg, "file", kvindex.SnapshotReasonTooLarge))
	require.Zero(t, small.Index().Stats().Memberships)
	small.snap.cfg.Path = "" // keep the file's name free for the next router
	small.Close()
	require.NoError(t, os.Rename(path+".rejected", path))

	reg = prometheus.NewRegistry()
	def := ckptRouter(t, path, reg, nil)
	require.Equal(t, 1.0, restores(t, reg, "file", "loaded"))
	require.Equal(t, 6, def.Index().Stats().Memberships)
	def.Close()

	_, good := peerRouter(t, "", 0)
	reg = prometheus.NewRegistry()
	peer := bootRouter(t, reg, BootstrapConfig{Peers: []string{good.URL}, MaxSectionBytes: 64})
	require.Equal(t, 1.0, restores(t, reg, "peer", kvindex.SnapshotReasonTooLarge))
	require.Zero(t, peer.Index().Stats().Memberships)
}
