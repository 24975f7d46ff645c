package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/kvroute/kvroute/simengine"
)

// hybridFlags are the flags of the engine's hybrid-attention mode
// (simengine.HybridConfig): a sliding window turns it on.
type hybridFlags struct {
	window, windowBlocks, windowGroups, mambaStates int
	mamba                                           bool
	order                                           string
}

func (h *hybridFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&h.window, "sliding-window", 0, "run a hybrid-attention model: a sliding-window KV-cache group of this window in tokens beside full attention, publishing its own group_idx (0 = a plain full-attention model)")
	fs.IntVar(&h.windowBlocks, "sliding-window-blocks", 0, "refused: every KV-cache group allocates from the --num-gpu-blocks blocks, as vLLM's groups share one block pool")
	fs.IntVar(&h.windowGroups, "sliding-window-groups", 0, "how many sliding-window KV-cache groups, each publishing its own group_idx, as vLLM splits a model with n window layers per full-attention layer into n (Gemma 3: 5; 0 = 1; with --sliding-window)")
	fs.BoolVar(&h.mamba, "mamba", false, "add a Mamba (state-space) KV-cache group (with --sliding-window)")
	fs.IntVar(&h.mambaStates, "mamba-states", 0, "refused: the Mamba group allocates its states from the --num-gpu-blocks blocks, as vLLM's groups share one block pool")
	fs.StringVar(&h.order, "kv-cache-group-order", "", fmt.Sprintf("which group_idx each KV-cache group gets, as vLLM numbers them by the model's first layer of each kind: %q (default), %q (Gemma 2 and 3) or %q (Jamba; with --mamba)",
		simengine.OrderFullFirst, simengine.OrderWindowFirst, simengine.OrderMambaFirst))
}

// config is the hybrid mode the flags ask for: nil without
// --sliding-window, an error when a hybrid flag is given without it or a
// group capacity is given at all (the groups share --num-gpu-blocks).
func (h *hybridFlags) config() (*simengine.HybridConfig, error) {
	if h.windowBlocks != 0 || h.mambaStates != 0 {
		return nil, errors.New("--sliding-window-blocks and --mamba-states are refused: every KV-cache group allocates from the --num-gpu-blocks blocks, as vLLM's groups share one block pool")
	}
	if h.window == 0 {
		if h.windowGroups != 0 || h.mamba || h.order != "" {
			return nil, errors.New("--sliding-window-groups, --mamba and --kv-cache-group-order need --sliding-window (a hybrid-attention model)")
		}
		return nil, nil
	}
	return &simengine.HybridConfig{SlidingWindow: h.window, WindowGroups: h.windowGroups,
		Mamba: h.mamba, GroupOrder: h.order}, nil
}
