package kvevents

import (
	"slices"

	"github.com/kvroute/kvroute/kvindex"
)

// A sliding-window or Mamba group's store can arrive before the
// full-attention store of the same blocks. vLLM caches a step's blocks
// group by group in the order of its KV-cache groups
// (HybridKVCacheCoordinator.cache_blocks walks its managers in group
// order; only the cache-hit lookup puts full attention first), and the
// groups are numbered in the order their first layer appears in the model:
// a model whose first layer is sliding-window (Gemma 3) or linear/Mamba
// (Qwen3-Next, Jamba) gets that group a lower index than full attention,
// so its BlockStored comes first in the step's batch. The group's blocks
// are named by engine hashes only the full-attention store maps to router
// keys, so the Applier keeps such hashes pending and records them as soon
// as a full-attention store of the same endpoint maps them: later in the
// same batch (the usual case), or in the next batch. A pending hash the
// group removes meanwhile is dropped; one still unmapped at the end of the
// batch after the one it came in is given up and counted (stores skipped,
// reason "unknown_hash"), as is every hash beyond maxPendingGroupHashes
// per endpoint. AllBlocksCleared drops them all.

// maxPendingGroupHashes bounds an endpoint's pending group hashes.
const maxPendingGroupHashes = 4096

// pendingGroup is part of a group store waiting for its full-attention
// blocks.
type pendingGroup struct {
	store  kvindex.GroupStore // Group, Kind, Window; Hashes: the pending ones
	kind   string             // kv_cache_spec_kind, for the skip metric
	batch  uint64             // endpointState.batches when it arrived
	hashes int                // len(store.Hashes), kept in pendN
}

// pend keeps hashes of a group store pending (st.mu held); those beyond
// the bound are counted at once.
func (a *Applier) pend(st *endpointState, g *kvindex.GroupStore, kind string, hashes []uint64, res *ApplyResult) {
	room := maxPendingGroupHashes - st.pendN
	if over := len(hashes) - room; over > 0 {
		a.m.skip(kind, kvindex.ReasonUnknownHash, 1)
		res.SkippedBlocks += over
		hashes = hashes[:max(room, 0)]
	}
	if len(hashes) == 0 {
		return
	}
	p := pendingGroup{store: kvindex.GroupStore{Group: g.Group, Kind: g.Kind, Window: g.Window,
		Hashes: slices.Clone(hashes)}, kind: kind, batch: st.batches, hashes: len(hashes)}
	st.pend = append(st.pend, p)
	st.pendN += p.hashes
}

// resolvePending retries the pending group hashes after a full-attention
// store (st.mu held): those now mapped are recorded, in arrival order.
func (a *Applier) resolvePending(endpoint string, st *endpointState) {
	kept := st.pend[:0]
	for i := range st.pend {
		p := &st.pend[i]
		if p.hashes == 0 {
			continue
		}
		g := p.store
		g.Unknown = st.unknownScratch()
		_, _ = a.ix.StoreGroup(endpoint, &g)
		st.pendScratch = g.Unknown[:0]
		st.pendN -= p.hashes
		if len(g.Unknown) == 0 {
			continue
		}
		p.store.Hashes = append(p.store.Hashes[:0], g.Unknown...)
		p.hashes = len(p.store.Hashes)
		st.pendN += p.hashes
		kept = append(kept, *p)
	}
	clear(st.pend[len(kept):])
	st.pend = kept
}

// unpend takes one pending store of each of hashes in group away (a group
// removal; st.mu held) and returns the hashes that were not pending.
func (st *endpointState) unpend(group int, hashes []uint64) []uint64 {
	if st.pendN == 0 {
		return hashes
	}
	rest := hashes[:0:0]
	for _, h := range hashes {
		found := false
		for i := range st.pend {
			p := &st.pend[i]
			if p.store.Group != group {
				continue
			}
			if j := slices.Index(p.store.Hashes, h); j >= 0 {
				p.store.Hashes = slices.Delete(p.store.Hashes, j, j+1)
				p.hashes--
				st.pendN--
				found = true
				break
			}
		}
		if !found {
			rest = append(rest, h)
		}
	}
	return rest
}

// endBatch gives up the pending hashes of the batch before this one (st.mu
// held) and starts the next batch.
func (a *Applier) endBatch(st *endpointState, res *ApplyResult) {
	if len(st.pend) > 0 {
		kept := st.pend[:0]
		for _, p := range st.pend {
			switch {
			case p.hashes == 0:
				continue
			case p.batch < st.batches:
				a.m.skip(p.kind, kvindex.ReasonUnknownHash, 1)
				res.SkippedBlocks += p.hashes
				st.pendN -= p.hashes
			default:
				kept = append(kept, p)
			}
		}
		clear(st.pend[len(kept):])
		st.pend = kept
	}
	st.batches++
}

// unknownScratch returns an empty non-nil slice for GroupStore.Unknown.
func (st *endpointState) unknownScratch() []uint64 {
	if st.pendScratch == nil {
		st.pendScratch = make([]uint64, 0, 64)
	}
	return st.pendScratch[:0]
}

// dropPending forgets every pending hash (AllBlocksCleared; st.mu held).
func (st *endpointState) dropPending() {
	st.pend, st.pendN = nil, 0
}
