package simengine

import (
	"fmt"
	"slices"
)

// Hybrid-attention mode: besides the full-attention group, the engine
// keeps one or more sliding-window groups and optionally a Mamba
// (state-space) group, and publishes each group's stores and removals with
// its group_idx, kv_cache_spec_kind and, for the window,
// kv_cache_spec_sliding_window, as vLLM does for hybrid models (a store
// with its parent hash, tokens and extra keys, as the full-attention
// group's).
//
// One pool: as in vLLM, whose hybrid coordinator gives every group's
// manager the same BlockPool of num_blocks blocks, every group allocates
// from the engine's pool of NumGPUBlocks blocks (blockPool). A cached
// block is keyed by its group and digest; freed blocks of every group join
// one free queue, and an allocation for any group evicts the least
// recently freed cached block, whatever its group, publishing that group's
// removal. A request holds blocks in every group as vLLM's KV cache
// coordinator allocates them (hybrid_alloc.go): on admission the hit
// blocks each group still needs, each step new blocks for the tokens
// scheduled; it frees, each step, the window blocks before its last W−1
// tokens and the Mamba states before its last one (remove_skipped_blocks),
// and the rest when it finishes. A request is scheduled only if the pool
// can give every group the blocks it needs for the step: otherwise the
// head of the waiting queue waits, and a running request preempts the
// last running one, as for full attention alone (vLLM's allocate_slots
// returns None). vllm:kv_cache_usage_perc counts the blocks of every group.
//
// Reuse: a cached prefix of L blocks is reused only when the window group
// holds the ⌈(W−1)/B⌉ blocks before L and the Mamba group holds the state
// at the end of block L−1 (vLLM's hybrid cache coordinator asks each group
// for the same), so a request may recompute blocks the full-attention
// group still holds.
//
// Group numbering: vLLM numbers a model's KV-cache groups in the order
// their first layer appears (get_kv_cache_groups buckets the layers by
// spec in layer order), publishes each group's stores and removals with
// that group_idx, and caches a step's blocks group by group in that order.
// By default full attention is group 0, the window 1 and Mamba 2;
// HybridConfig.GroupOrder numbers them as a model whose first layer is
// sliding-window (Gemma 2 and 3) or Mamba (Jamba) does, and the stores of
// a group numbered before full attention go out before the full-attention
// store of the same blocks, in the same batch.
//
// Several window groups: vLLM splits a kind with n times as many layers
// as another into n groups of equal layer count, numbered one after the
// other (Gemma 3's five window layers per full-attention one make five
// window groups, 0 to 4, and full attention 5). HybridConfig.WindowGroups
// models that: each window group publishes its own stores and removals,
// and a prefix is reused only when every one of them holds its window.
//
// Simplifications: one Mamba group, and a Mamba state is kept at every
// block end (vLLM's "all" cache mode).

// Kinds of the hybrid mode's groups, as vLLM's kv_cache_spec_kind.
const (
	KindSlidingWindow = "sliding_window"
	KindMamba         = "mamba"
)

// Values of HybridConfig.GroupOrder: which group a model's first layer
// belongs to, and so which group vLLM numbers 0.
const (
	// OrderFullFirst numbers full attention 0, the window 1 and Mamba 2
	// (a model whose first layer is full attention; the default).
	OrderFullFirst = "full-first"
	// OrderWindowFirst numbers the window 0, full attention 1 and Mamba 2,
	// as vLLM does for Gemma 2 and 3, whose first layer is a local
	// (sliding-window) one.
	OrderWindowFirst = "window-first"
	// OrderMambaFirst numbers Mamba 0, full attention 1 and the window 2,
	// as vLLM does for a hybrid model whose first layer is a Mamba one
	// (Jamba). It needs HybridConfig.Mamba.
	OrderMambaFirst = "mamba-first"
)

// HybridConfig enables the hybrid-attention mode (Config.Hybrid).
type HybridConfig struct {
	// SlidingWindow is the sliding window in tokens of the window groups.
	// Required (> 1).
	SlidingWindow int `json:"slidingWindow"`
	// WindowBlocks is refused unless 0: every group allocates from the
	// engine's one pool of NumGPUBlocks blocks, as vLLM's groups share one
	// block pool, so a group has no capacity of its own. It is kept only
	// to refuse configurations written for separate group caches with a
	// clear error.
	WindowBlocks int `json:"windowBlocks"`
	// WindowGroups is how many sliding-window KV-cache groups the model
	// has (default 1, at most 64): vLLM gives a model with n window layers
	// per full-attention layer n window groups (Gemma 3: 5), each
	// publishing its own group_idx.
	WindowGroups int `json:"windowGroups"`
	// Mamba adds a Mamba group.
	Mamba bool `json:"mamba"`
	// MambaStates is refused unless 0, as WindowBlocks: the Mamba group
	// allocates its states from the engine's one pool.
	MambaStates int `json:"mambaStates"`
	// GroupOrder numbers the groups as the model's layer layout would on
	// vLLM: OrderFullFirst (default), OrderWindowFirst or OrderMambaFirst.
	// It changes the group_idx of every event and the order of a step's
	// stores, not what the engine caches or reuses.
	GroupOrder string `json:"groupOrder"`
}

// withDefaults fills zero fields and validates h.
func (h HybridConfig) withDefaults() (HybridConfig, error) {
	if h.GroupOrder == "" {
		h.GroupOrder = OrderFullFirst
	}
	if h.WindowGroups == 0 {
		h.WindowGroups = 1
	}
	switch {
	case h.WindowBlocks != 0 || h.MambaStates != 0:
		return h, fmt.Errorf("%w: hybrid.windowBlocks and hybrid.mambaStates must be 0: every KV-cache group allocates from the one pool of numGPUBlocks blocks, as vLLM's groups share one block pool (size the pool with numGPUBlocks)", ErrBadConfig)
	case h.GroupOrder != OrderFullFirst && h.GroupOrder != OrderWindowFirst && h.GroupOrder != OrderMambaFirst:
		return h, fmt.Errorf("%w: hybrid.groupOrder %q is not %q, %q or %q", ErrBadConfig, h.GroupOrder, OrderFullFirst, OrderWindowFirst, OrderMambaFirst)
	case h.GroupOrder == OrderMambaFirst && !h.Mamba:
		return h, fmt.Errorf("%w: hybrid.groupOrder %q needs hybrid.mamba", ErrBadConfig, h.GroupOrder)
	case h.SlidingWindow < 2 || h.SlidingWindow > 1<<24:
		return h, fmt.Errorf("%w: hybrid.slidingWindow %d not in [2, 16777216]", ErrBadConfig, h.SlidingWindow)
	case h.WindowGroups < 1 || h.WindowGroups > maxWindowGroups:
		return h, fmt.Errorf("%w: hybrid.windowGroups %d not in [1, %d]", ErrBadConfig, h.WindowGroups, maxWindowGroups)
	}
	return h, nil
}

// fullGroupLocked is the full-attention group's group_idx: 0 without the
// hybrid mode.
func (e *Engine) fullGroupLocked() int {
	if e.hy == nil {
		return 0
	}
	return e.hy.full
}

// maxWindowGroups bounds HybridConfig.WindowGroups.
const maxWindowGroups = 64

// windowBlocks is how many blocks before a prefix end the window group must
// hold: ⌈(W−1)/B⌉.
func (hy *hybrid) windowBlocks(bs int) int { return (hy.window - 1 + bs - 1) / bs }

// allows reports whether a cached prefix of L blocks of hashes is usable.
func (hy *hybrid) allows(hashes []Digest, L, bs int) bool {
	if L == 0 {
		return true
	}
	if hy.mamba != nil && !hy.has(hy.mamba, hashes[L-1]) {
		return false
	}
	for _, g := range hy.swa {
		for j := max(0, L-hy.windowBlocks(bs)); j < L; j++ {
			if !hy.has(g, hashes[j]) {
				return false
			}
		}
	}
	return true
}

// usable returns the longest usable prefix of at most n blocks.
func (hy *hybrid) usable(hashes []Digest, n, bs int) int {
	for L := n; L > 0; L-- {
		if hy.allows(hashes, L, bs) {
			return L
		}
	}
	return 0
}

// hybridHitLocked limits a request's full-attention hit to the prefix every
// group can serve. Like vLLM's lookup it only reads the groups: a request
// that then waits for blocks refreshes nothing (hybridTouchHitsLocked takes
// its blocks, on admission).
func (e *Engine) hybridHitLocked(s *seq, hits []int32) []int32 {
	return hits[:e.hy.usable(s.hashes, len(hits), e.cfg.BlockSize)]
}

// hybridStoreLocked caches blocks from … full-1 of s in the window and Mamba
// groups numbered before the full-attention group (before) or after it,
// and queues their stores in group order, as vLLM caches a step's blocks
// group by group; before is called ahead of the full-attention store, the
// others after it. Each block goes into the pool block s was allocated
// for it in that group (hybridAllocLocked), so a store evicts nothing: the
// removals of the blocks its allocation evicted went out before it, as
// vLLM's get_new_blocks evicts before cache_full_blocks stores. Every block
// is cached anew, as in vLLM every block past a request's hit is a new
// one, even where the group holds the same block already (the hit was cut
// short by another group, or another request computed it meanwhile): it
// is stored again, and evicted on its own. A block the group no longer
// needs (before the window of a KV transfer's tokens) has no pool block
// and is not stored.
func (e *Engine) hybridStoreLocked(s *seq, from, full int, before bool) {
	hy := e.hy
	for gi, g := range hy.groups {
		if (g.group < hy.full) != before {
			continue
		}
		hy.added = hy.added[:0]
		blocks := s.gblocks[gi]
		for i := from; i < full && i < len(blocks); i++ {
			if blocks[i] < 0 {
				continue
			}
			e.pool.cache(blocks[i], gkey{g.group, s.hashes[i]})
			hy.added = append(hy.added, i)
		}
		if e.cfg.Sink != nil {
			e.queueGroupStoreLocked(s, g)
		}
		hy.added = hy.added[:0]
	}
}

// queueGroupStoreLocked queues the stores of the blocks group g added for
// s since its last one (hy.added), if any, and empties hy.added. Like
// vLLM's cache_full_blocks for every group, a store carries its parent
// block hash, its blocks' token IDs and extra keys; a run of consecutive
// added blocks is a store of its own.
func (e *Engine) queueGroupStoreLocked(s *seq, g *cacheGroup) {
	hy, bs := e.hy, e.cfg.BlockSize
	for added := hy.added; len(added) > 0; {
		run := 1
		for run < len(added) && added[run] == added[run-1]+1 {
			run++
		}
		from, to := added[0], added[run-1]+1
		st := Event{Type: BlockStored, BlockSize: bs, LoRAID: s.req.LoRAID, LoRAName: s.req.LoRAName,
			Medium: MediumGPU, GroupIdx: g.group, Kind: g.kind,
			BlockHashes: make([]uint64, 0, to-from),
			TokenIDs:    slices.Clone(s.tokens[from*bs : to*bs]),
			ExtraKeys:   make([][]ExtraKey, 0, to-from)}
		if from > 0 {
			st.ParentHash, st.HasParent = s.hashes[from-1].U64(), true
		}
		if g.kind == KindSlidingWindow {
			st.SlidingWindow = hy.window
		}
		for i := from; i < to; i++ {
			st.BlockHashes = append(st.BlockHashes, s.hashes[i].U64())
			var keys []ExtraKey
			if k := e.extraKeysLocked(s, i); len(k) > 0 {
				keys = slices.Clone(k)
			}
			st.ExtraKeys = append(st.ExtraKeys, keys)
		}
		e.pending = append(e.pending, st)
		added = added[run:]
	}
	hy.added = hy.added[:0]
}
