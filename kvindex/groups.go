package kvindex

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Hybrid-attention models (sliding-window and Mamba layers beside full
// attention) cache one KV-cache group per layer kind. The block map indexes
// the prefix-shaped groups (full attention, MLA); the groups whose blocks
// say nothing about a prefix on their own are kept beside it, per endpoint,
// as the set of router keys each group holds:
//
//   - a sliding-window group of window W tokens: a prefix of L router
//     blocks is reusable only if the group still holds the ⌈(W−1)/R⌉ blocks
//     before L (what the next token attends to; vLLM's sliding-window
//     manager asks for the same run of blocks);
//   - a Mamba (state-space) group: only if the group holds the block ending
//     at L, whose state the engine resumes from.
//
// Match returns, for an endpoint with such groups, the longest L no longer
// than its contiguous full-attention blocks (rounded down to whole engine
// blocks for an engine of another block size, engine_blocks.go) that
// every group allows (0 is always allowed). A block the endpoint holds
// speculatively (Speculate) counts as held by every group: the request
// routed there caches it in all of them. An endpoint without them costs Match one check.

// GroupKind is the kind of a KV-cache group the index tracks beside the
// block map.
type GroupKind uint8

// Group kinds.
const (
	// GroupSlidingWindow: sliding-window attention (vLLM's
	// "sliding_window" and "sliding_window_mla").
	GroupSlidingWindow GroupKind = iota + 1
	// GroupMamba: a state-space group (vLLM's "mamba").
	GroupMamba
)

// GroupKindOf maps a kv_cache_spec_kind to the GroupKind the index tracks
// beside the block map; ok is false for prefix-shaped kinds and kinds it
// does not understand.
func GroupKindOf(kind string) (GroupKind, bool) {
	switch kind {
	case "sliding_window", "sliding_window_mla":
		return GroupSlidingWindow, true
	case "mamba":
		return GroupMamba, true
	}
	return 0, false
}

// ErrGroupFull is returned by StoreGroup when the endpoint's group already
// holds Config.MaxBlocksPerEndpoint blocks: the blocks beyond are not
// recorded (their prefixes are then reported shorter, never longer).
var ErrGroupFull = errors.New("kvindex: cache group holds its maximum of blocks")

// maxGroupsTracked bounds the non-prefix groups per endpoint. vLLM splits
// a kind with n times as many layers as full attention into n groups
// (Gemma 3: five sliding-window groups; Granite 4.0-H: nine Mamba groups),
// so an endpoint may have many of one kind; an endpoint with more than
// this has its matches cut to nothing (hybridEP.overflow).
const maxGroupsTracked = 64

// groupSet is one non-prefix group of an endpoint.
type groupSet struct {
	group  int32
	kind   GroupKind
	window int                // sliding window in tokens (GroupSlidingWindow)
	byHash map[uint64]hashRef // engine hash → its key and stores, to resolve removals
	held   map[Key]uint32     // key → stores not yet removed
}

// hashRef is a stored engine hash of a group: its key and how many stores
// of it are not yet removed.
type hashRef struct {
	key Key
	n   uint32
}

// hybridEP is an endpoint's non-prefix groups. Writers hold mu; Match reads
// under RLock. bytes is their accounted memory (groups_mem.go), written
// under mu and read by memory eviction.
type hybridEP struct {
	mu     sync.RWMutex
	groups []*groupSet
	dead   bool // cleared and forgotten: writers must look the endpoint up again
	// overflow: a group past maxGroupsTracked was refused, so no prefix
	// of the endpoint can be checked against all its groups.
	overflow bool
	bytes    atomic.Int64
}

// GroupStore describes the blocks a non-prefix group stored, as the index
// needs them: the router keys are resolved from the endpoint's engine
// hashes (stored by its full-attention group), so the tokens are not needed.
type GroupStore struct {
	Group  int
	Kind   GroupKind
	Window int      // GroupSlidingWindow: the window in tokens (> 0)
	Hashes []uint64 // engine hashes, at the index's block size
	// Unknown, when non-nil, receives (appended) the hashes StoreGroup
	// skipped because the endpoint's full-attention blocks do not map
	// them, so a caller can retry them once they are stored (an engine
	// may publish a group's store before the full-attention store of the
	// same blocks; see kvevents).
	Unknown []uint64
}

// StoreGroup records that endpoint's non-prefix group g.Group holds the
// blocks of g.Hashes. Hashes the endpoint's full-attention blocks do not
// map (never stored, or already evicted) are skipped and counted in
// unknown. It returns ErrGroupFull when the group is at its bound, and an
// error for a malformed store (a sliding-window group without a window, a
// group of another kind than before, a group index outside [0, 254], a
// group past the 64 an endpoint's groups are tracked to, which then cuts
// the endpoint's matches to nothing).
func (ix *Index) StoreGroup(endpoint string, g *GroupStore) (unknown int, err error) {
	if g.Kind == GroupSlidingWindow && g.Window <= 0 || g.Kind != GroupSlidingWindow && g.Kind != GroupMamba ||
		g.Group < 0 || g.Group > maxGroupIndex {
		return len(g.Hashes), &StoreError{Reason: ReasonMalformed, Err: ErrMalformed, Skipped: len(g.Hashes)}
	}
	ep, _ := ix.lockEndpoint(endpoint, false)
	if ep == nil {
		if g.Unknown != nil {
			g.Unknown = append(g.Unknown, g.Hashes...)
		}
		return len(g.Hashes), &StoreError{Reason: ReasonUnknownHash, Err: ErrUnknownHash, Skipped: len(g.Hashes)}
	}
	keys := make([]Key, 0, len(g.Hashes))
	for _, h := range g.Hashes {
		if k, ok := ep.eng.Get(h); ok {
			keys = append(keys, k)
		} else {
			keys = append(keys, 0)
			unknown++
			if g.Unknown != nil {
				g.Unknown = append(g.Unknown, h)
			}
		}
	}
	// The groups are recorded under the endpoint's lock (lock order: the
	// endpoint's, then its groups'), so a Clear, which forgets the groups
	// under it too, either precedes this store (which then finds no
	// endpoint) or follows it and takes its entries along.
	hy := ix.lockHybrid(endpoint)
	err = ix.storeGroupLocked(hy, g, keys)
	ix.accountGroups(hy)
	hy.mu.Unlock()
	ep.mu.Unlock()
	if ix.nBytes.Load() > ix.maxBytes {
		ix.enforceMemory()
	}
	if unknown > 0 && err == nil {
		err = &StoreError{Reason: ReasonUnknownHash, Err: ErrUnknownHash, Skipped: unknown}
	}
	return unknown, err
}

// storeGroupLocked records g's resolved keys (0: unknown hash, skipped) in
// hy (hy.mu held).
func (ix *Index) storeGroupLocked(hy *hybridEP, g *GroupStore, keys []Key) (err error) {
	gs := hy.find(int32(g.Group))
	if gs == nil {
		if len(hy.groups) >= maxGroupsTracked {
			// Matching without the group would credit the endpoint with
			// prefixes it may not serve: its matches are cut to nothing.
			hy.overflow = true
			return &StoreError{Reason: ReasonMalformed, Err: ErrMalformed, Skipped: len(g.Hashes)}
		}
		gs = &groupSet{group: int32(g.Group), kind: g.Kind, byHash: map[uint64]hashRef{}, held: map[Key]uint32{}}
		hy.groups = append(hy.groups, gs)
		ix.nHybrid.Add(1)
		ix.gen.Add(1) // Match results re-resolve which candidates have groups
	}
	if gs.kind != g.Kind {
		return &StoreError{Reason: ReasonMalformed, Err: ErrMalformed, Skipped: len(g.Hashes)}
	}
	if g.Kind == GroupSlidingWindow {
		gs.window = g.Window
	}
	for i, h := range g.Hashes {
		k := keys[i]
		if k == 0 {
			continue
		}
		r, ok := gs.byHash[h]
		if !ok && len(gs.byHash) >= ix.maxBlocks {
			return &StoreError{Reason: ReasonGroupFull, Err: ErrGroupFull, Skipped: len(g.Hashes) - i}
		}
		if ok && r.key != k { // the engine reused the hash for other content
			ix.dropGroupKey(gs, r.key, r.n)
			r.n = 0
		}
		// Counts stop at the most a snapshot reader accepts, as a
		// membership's do (addPair): an engine that re-announces a block
		// without removing it (vLLM's "full" report mode) would otherwise
		// make every snapshot of the index fail to load, then wrap to 0.
		gs.byHash[h] = hashRef{key: k, n: min(r.n+1, maxSnapshotCount)}
		gs.held[k] = min(gs.held[k]+1, maxSnapshotCount)
	}
	return nil
}

// ReasonGroupFull: ErrGroupFull.
const ReasonGroupFull Reason = "group_full"

// RemoveGroup applies a removal of endpoint's non-prefix group: each engine
// hash loses one store. It returns the number of blocks the group no longer
// holds. Unknown endpoints, groups and hashes are ignored.
func (ix *Index) RemoveGroup(endpoint string, group int, hashes []uint64) (removed int) {
	hy, ok := ix.hybrid.Load(endpoint)
	if !ok || group < 0 || group > maxGroupIndex {
		return 0
	}
	hy.mu.Lock()
	defer hy.mu.Unlock()
	gs := hy.find(int32(group))
	if gs == nil {
		return 0
	}
	for _, h := range hashes {
		r, ok := gs.byHash[h]
		if !ok {
			continue
		}
		if r.n > 1 {
			gs.byHash[h] = hashRef{key: r.key, n: r.n - 1}
		} else {
			delete(gs.byHash, h)
		}
		if ix.dropGroupKey(gs, r.key, 1) {
			removed++
		}
	}
	ix.accountGroups(hy)
	return removed
}

// dropGroupKey takes n stores of key away from gs and reports whether the
// group no longer holds it.
func (ix *Index) dropGroupKey(gs *groupSet, key Key, n uint32) bool {
	if c := gs.held[key]; c > n {
		gs.held[key] = c - n
		return false
	}
	delete(gs.held, key)
	return true
}

// clearGroups forgets endpoint's non-prefix groups (Clear, with the
// endpoint's lock held when it is registered).
func (ix *Index) clearGroups(endpoint string) {
	if hy, ok := ix.hybrid.LoadAndDelete(endpoint); ok {
		hy.mu.Lock()
		ix.nHybrid.Add(-int64(len(hy.groups)))
		hy.groups, hy.dead = nil, true
		ix.accountGroups(hy)
		hy.mu.Unlock()
		ix.gen.Add(1)
	}
}

// lockHybrid returns endpoint's groups, created if needed, with mu held.
func (ix *Index) lockHybrid(endpoint string) *hybridEP {
	for {
		hy, _ := ix.hybrid.LoadOrCompute(endpoint, func() *hybridEP { return &hybridEP{} })
		hy.mu.Lock()
		if !hy.dead {
			return hy
		}
		hy.mu.Unlock()
	}
}

func (hy *hybridEP) find(group int32) *groupSet {
	for _, g := range hy.groups {
		if g.group == group {
			return g
		}
	}
	return nil
}

// usable returns the longest prefix of at most n blocks of keys that every
// group allows, counting the blocks spec holds as held by every group
// (hy.mu read-locked by the caller); 0 for an endpoint with more groups
// than tracked.
//
// A group allows L when it holds the last need blocks before L (fewer when
// L < need): ⌈(W−1)/R⌉ for a sliding window, 1 for Mamba. The candidates
// are tried from n down; a group that misses block j rules out every L in
// (j, j+need], so the next candidate is j. Each group remembers the lowest
// block of its verified run before the candidate (lo), which only moves
// down, so it looks each block up at most once: O(n) lookups per group,
// where trying every L cost up to n × need. A prompt usable whole costs
// only the windows before n.
func (hy *hybridEP) usable(keys []Key, n, bs int, spec *specHeld) int {
	if hy.overflow {
		return 0
	}
	var buf [maxGroupsTracked]int
	lo := buf[:0]
	if len(hy.groups) > len(buf) {
		lo = make([]int, 0, len(hy.groups))
	}
	for range hy.groups {
		lo = append(lo, n) // [lo, L) are held: none yet
	}
	L := n
next:
	for L > 0 {
		for i, g := range hy.groups {
			need := g.need(bs)
			if need <= 0 {
				continue
			}
			if lo[i] > L {
				lo[i] = L
			}
			for from := max(0, L-need); lo[i] > from; {
				j := lo[i] - 1
				lo[i] = j
				if g.held[keys[j]] == 0 && !spec.held(keys[j]) {
					L = j
					continue next
				}
			}
		}
		return L
	}
	return 0
}

// need returns how many blocks of bs tokens before a prefix's end the group
// must hold for the prefix to be reusable (0: none).
func (g *groupSet) need(bs int) int {
	switch g.kind {
	case GroupMamba:
		return 1
	case GroupSlidingWindow:
		return (g.window - 1 + bs - 1) / bs // ⌈(W−1)/R⌉ blocks before L
	}
	return 0
}
