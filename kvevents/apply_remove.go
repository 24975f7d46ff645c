package kvevents

import (
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

func (a *Applier) remove(endpoint string, st *endpointState, e *wire.Event, res *ApplyResult) {
	group := eventGroup(e)
	if group < 0 {
		a.skip(res, "", kvindex.ReasonMalformed, len(e.BlockHashes))
		return
	}
	if a.tooManyTokens(len(e.BlockHashes), a.engineBlockSize(endpoint, st)) {
		a.skip(res, st.groups[group], skipTooManyTokens, len(e.BlockHashes))
		return
	}
	kind, seen := st.groups[group]
	switch {
	case !seen && e.HasGroup:
		// An explicit group never seen in a store. A removal without
		// group_idx is always processed (engines without groups).
		a.skip(res, "unknown", skipUnknownGroup, len(e.BlockHashes))
		return
	case seen && !kvindex.IndexableKind(kind):
		if gk, ok := kvindex.GroupKindOf(kind); ok && normalizeMedium(e.Medium) == tierGPU {
			a.removeGroup(endpoint, st, e, gk, group, res)
			return
		}
		// A group set holds the blocks the device holds: a secondary
		// tier's eviction (vLLM's offloading connector reports one with
		// the group's group_idx) leaves it alone.
		a.skip(res, kind, kvindex.ReasonNonPrefixKind, len(e.BlockHashes))
		return
	}
	if len(e.BlockHashes) == 0 {
		a.skip(res, "", skipNoBlocks, 0)
		return
	}
	if E := a.engineBlockSize(endpoint, st); E != a.bs {
		a.removeResized(endpoint, st, e, E, group, res)
		return
	}
	res.Removed++
	res.RemovedBlocks += a.ix.Remove(endpoint, e.BlockHashes, normalizeMedium(e.Medium), group)
}
