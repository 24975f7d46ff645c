package checkpoint_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/kvroute/kvroute/checkpoint"
	"github.com/kvroute/kvroute/kvindex"
)

// An index kept by a Keeper is written to its checkpoint file on Close and
// restored from it at the next start; a second replica bootstraps from the
// first one's snapshot Handler instead.
func Example() {
	dir, _ := os.MkdirTemp("", "checkpoint-example")
	defer os.RemoveAll(dir)
	cfg := checkpoint.Config{Path: filepath.Join(dir, "index.ckpt")}
	newIndex := func() *kvindex.Index {
		ix, _ := kvindex.New(kvindex.Config{BlockSize: 4}, kvindex.Options{})
		return ix
	}

	ix := newIndex()
	k, err := checkpoint.Restore(context.Background(), ix, cfg, checkpoint.BootstrapConfig{}, checkpoint.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	k.Start()
	_ = ix.Store("10.0.0.7:8000", &kvindex.StoreEvent{EngineHashes: []uint64{11, 12}, Tokens: []uint32{1, 2, 3, 4, 5, 6, 7, 8},
		BlockSize: 4, Model: "m", Group: 0, Kind: "full_attention"})
	k.Close() // writes the checkpoint
	ix.Close()

	restarted := newIndex()
	defer restarted.Close()
	k, _ = checkpoint.Restore(context.Background(), restarted, cfg, checkpoint.BootstrapConfig{}, checkpoint.Options{})
	k.Start()
	defer k.Close()
	fmt.Println(restarted.Stats().Memberships, "memberships after the restart")

	srv := httptest.NewServer(k.Handler()) // mount it on an internal port
	defer srv.Close()
	replica := newIndex()
	defer replica.Close()
	peer, _ := checkpoint.Restore(context.Background(), replica, checkpoint.Config{},
		checkpoint.BootstrapConfig{Peers: []string{srv.URL}}, checkpoint.Options{})
	defer peer.Close()
	fmt.Println(replica.Stats().Memberships, "memberships from the peer")
	// Output:
	// 2 memberships after the restart
	// 2 memberships from the peer
}
