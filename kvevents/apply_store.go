package kvevents

import (
	"context"
	"errors"
	"log/slog"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

func (a *Applier) store(endpoint, model string, st *endpointState, e *wire.Event, res *ApplyResult) {
	n := len(e.BlockHashes)
	group := eventGroup(e)
	if group < 0 {
		a.skip(res, e.Kind, kvindex.ReasonMalformed, n)
		return
	}
	if e.BlockSize > maxEngineBlockSize {
		// Before the endpoint learns it: a store without tokens (tier-only,
		// or of a sliding-window group) has nothing to check it against,
		// and each of its engine blocks would map to block_size / the
		// index's block size router blocks.
		a.skip(res, e.Kind, skipInvalidBlockSize, n)
		return
	}
	if len(e.TokenIDs) == 0 && e.BlockSize == 0 {
		// vLLM's offloading connector announces a block it holds no
		// request metadata for as a placeholder: hashes only, block_size
		// 0 and no kv_cache_spec_kind. It is a tier-only store at the
		// endpoint's block size, in the kind its group's stores taught;
		// in a sliding-window or Mamba group, whose sets hold no tiers,
		// it is skipped.
		ph := *e
		ph.BlockSize = a.engineBlockSize(endpoint, st)
		if k, ok := st.groups[group]; ok && ph.Kind == "" {
			ph.Kind = k
		}
		if !kvindex.IndexableKind(ph.Kind) {
			a.skip(res, ph.Kind, kvindex.ReasonNonPrefixKind, n)
			return
		}
		e = &ph
	}
	if a.tooManyTokens(n, e.BlockSize) {
		a.skip(res, e.Kind, skipTooManyTokens, n)
		return
	}
	if k, ok := st.groups[group]; ok && k != e.Kind || !ok && len(st.groups) < maxGroupsPerEndpoint {
		st.groups[group] = e.Kind
	}
	adapter, named := a.adapter(e)
	if gk, ok := kvindex.GroupKindOf(e.Kind); ok && named && n > 0 {
		a.storeGroup(endpoint, st, e, gk, group, res)
		return
	}
	if e.InvalidTokens && named && kvindex.IndexableKind(e.Kind) {
		if lead := leadingBlocks(e); lead != nil {
			// The blocks from the first non-token on are skipped; the
			// whole blocks before it are stored like any other.
			a.m.skip(e.Kind, skipInvalidTokens, 1)
			res.SkippedBlocks += n - len(lead.BlockHashes)
			e, n = lead, len(lead.BlockHashes)
		}
	}
	var reason Reason
	switch {
	case !named:
		reason = skipLoRAUnnamed
	case !kvindex.IndexableKind(e.Kind):
		reason = kvindex.ReasonNonPrefixKind
	case n == 0:
		reason = skipNoBlocks
	case e.InvalidTokens:
		reason = skipInvalidTokens
	case e.BlockSize <= 0:
		reason = skipInvalidBlockSize
	case len(e.TokenIDs) != 0 && len(e.TokenIDs) != n*e.BlockSize:
		reason = kvindex.ReasonNonDense
	}
	if reason != "" {
		a.skip(res, e.Kind, reason, n)
		return
	}
	if adapter != "" {
		model = adapter
	}
	if e.BlockSize != a.bs {
		a.storeResized(endpoint, model, st, e, st.extraKeys(e, adapter), group, res)
		return
	}
	st.engBS = e.BlockSize
	se := &st.se
	*se = kvindex.StoreEvent{
		EngineHashes: e.BlockHashes,
		ParentHash:   e.ParentHash,
		HasParent:    e.HasParent,
		Tokens:       e.TokenIDs,
		BlockSize:    e.BlockSize,
		Model:        model,
		ExtraKeys:    st.extraKeys(e, adapter),
		Tier:         normalizeMedium(e.Medium),
		Group:        group,
		Kind:         e.Kind,
	}
	// vLLM's offloading connector repeats an offloaded chunk's tokens
	// without its extra keys: blocks the endpoint knows keep their key.
	se.KeepKnown = se.Tier != tierGPU && len(e.ExtraKeys) == 0
	err := a.ix.Store(endpoint, se)
	se.EngineHashes, se.Tokens, se.ExtraKeys = nil, nil, nil // do not pin the batch
	if err == nil {
		res.Stored++
		res.StoredBlocks += n
		return
	}
	a.storeFailed(endpoint, e, err, res)
}

// parentMissing counts a store dropped because its parent is unknown.
func (a *Applier) parentMissing(endpoint string, e *wire.Event, res *ApplyResult) {
	res.ParentMissing++
	res.Dropped++
	a.m.drop(endpoint, kvindex.ReasonParentMissing, 1)
	if a.log.Enabled(context.Background(), slog.LevelDebug) {
		a.log.Debug("Failed to get request key for parent block",
			"endpoint", endpoint, "parent_block_hash", e.ParentHash, "blocks", len(e.BlockHashes))
	}
}

// storeFailed counts a store of e the index refused with err.
func (a *Applier) storeFailed(endpoint string, e *wire.Event, err error, res *ApplyResult) {
	n := len(e.BlockHashes)
	if errors.Is(err, kvindex.ErrParentMissing) {
		a.parentMissing(endpoint, e, res)
		return
	}
	reason := skipIndexRejected
	var serr *kvindex.StoreError
	if errors.As(err, &serr) && serr.Reason != "" {
		reason = serr.Reason
	}
	if errors.Is(err, kvindex.ErrUnknownHash) && serr != nil && serr.Skipped < n {
		// A tier-only store applied in part: the known hashes gained the tier.
		res.Stored++
		res.StoredBlocks += n - serr.Skipped
		res.SkippedBlocks += serr.Skipped
		a.m.skip(e.Kind, reason, 1)
		return
	}
	a.skip(res, e.Kind, reason, n)
}
