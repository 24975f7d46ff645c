package kvroute_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/checkpoint"
	"github.com/kvroute/kvroute/kvindex"
)

// A Router with a checkpoint writes its index on Close and starts from it
// on the next New: the restarted router knows the prefixes at once (and,
// with events on, resumes each engine's stream from the checkpoint).
func ExampleNew_checkpoint() {
	dir, err := os.MkdirTemp("", "kvroute-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	cfg := kvroute.DefaultConfig()
	cfg.Model = "m"
	cfg.BlockSize = 4
	cfg.Events.Enabled = new(false) // this example feeds the index itself
	cfg.DisableRender = true
	cfg.Checkpoint = checkpoint.Config{Path: filepath.Join(dir, "index.ckpt")}

	r, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	tokens := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	err = r.Index().Store("10.0.0.7:8000", &kvindex.StoreEvent{EngineHashes: []uint64{11, 12}, Tokens: tokens,
		BlockSize: 4, Model: "m", Group: 0, Kind: "full_attention"})
	r.Close() // writes the checkpoint
	if err != nil {
		fmt.Println(err)
		return
	}

	r, err = kvroute.New(context.Background(), cfg, kvroute.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	fmt.Println(r.Index().Stats().Memberships, "memberships after the restart")
	// Output: 2 memberships after the restart
}
