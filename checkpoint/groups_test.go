package checkpoint

import (
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/kvindex"
)

// storeHybrid stores a hybrid endpoint: 6 full-attention blocks, and a
// sliding-window group holding only the last 2, so its usable prefix is 6
// blocks only where the window is covered.
func storeHybrid(t *testing.T, ix *kvindex.Index, endpoint string) []uint32 {
	t.Helper()
	toks := storeBlocks(t, ix, endpoint, 7, 6, "hy-pos")
	pl := ix.LockPosition(endpoint)
	_, err := ix.StoreGroup(endpoint, &kvindex.GroupStore{Group: 1, Kind: kvindex.GroupSlidingWindow,
		Window: ix.BlockSize() + 1, Hashes: []uint64{7004, 7005}})
	require.NoError(t, err)
	pl.Unlock()
	return toks
}

func usable(ix *kvindex.Index, endpoint string, toks []uint32) []int {
	var out []int
	for n := 1; n*ix.BlockSize() <= len(toks); n++ {
		var m kvindex.MatchResult
		ix.Match(kvindex.Keys(nil, toks[:n*ix.BlockSize()], ix.BlockSize(), &kvindex.KeyParams{Model: testModel}), []string{endpoint}, &m)
		out = append(out, m.Endpoints()[0].Blocks)
	}
	return out
}

// A hybrid endpoint's cache groups survive a checkpoint file and a peer
// bootstrap: the restored index answers with the same usable prefixes.
func TestCheckpointAndPeerKeepHybridGroups(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	const ep = "10.0.0.9:8000"
	path := filepath.Join(t.TempDir(), "index.ckpt")
	cfg := Config{Path: path, Interval: -1}
	k := started(t, testBlockSize, cfg, BootstrapConfig{}, nil)
	toks := storeHybrid(t, k.ix, ep)
	want := usable(k.ix, ep, toks)
	require.Equal(t, []int{0, 0, 0, 0, 5, 6}, want, "the window group limits the endpoint")
	srv := httptest.NewServer(k.Handler())
	t.Cleanup(srv.Close)
	k3 := boot(t, prometheus.NewRegistry(), BootstrapConfig{Peers: []string{srv.URL}})
	require.Equal(t, want, usable(k3.ix, ep, toks), "from a peer")
	k.Close()

	k2 := started(t, testBlockSize, cfg, BootstrapConfig{}, prometheus.NewRegistry())
	require.Equal(t, want, usable(k2.ix, ep, toks), "from the checkpoint file")
}
