package kvevents

import (
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// Engines need not share the router's block size: vLLM raises the attention
// block size of hybrid models (to line it up with the Mamba state), and
// operators run 16, 32, 64 or 128. The Applier indexes such an endpoint's
// events at the index's block size R (the size of the keys the router
// computes for a request), from an engine block size E:
//
//   - A store with token IDs is re-chunked: its tokens, preceded by the
//     tokens its parent left after the last whole router block, are keyed
//     in router blocks, chained on the parent's last whole router block.
//     Each router block is owned by the engine block that completes it
//     (holds its last token) and is stored in the index under a synthetic
//     engine hash derived from that engine block's hash and the router
//     block's rank among those it completes (synthHash).
//   - A removal, or a store without tokens (an offload to another tier),
//     names engine hashes only: each is mapped to the synthetic hashes of
//     the router blocks it completes. When E is a multiple of R that is by
//     the ratio alone (E/R router blocks each, nothing remembered); otherwise
//     the Applier remembers, per engine block, how many router blocks it
//     completes and the tokens it leaves over (sideTable), which a child
//     store needs to continue the chain.
//
// What is lost, by design: (1) a router block held by the engine only in
// part (it reaches into an engine block the engine does not hold) is never
// indexed, and Match rounds the endpoint's count down to the engine blocks
// its router blocks guarantee (kvindex.Index.SetEngineBlockSize): exact
// when either size is a multiple of the other, up to one engine block
// (plus one router block) short otherwise; (2) a router block
// is dropped when the engine block completing it is removed — engines evict
// a chain from its end (vLLM frees a request's blocks last-first, so a
// block's descendants leave its free queue before it), so an earlier engine
// block spanned by the same router block is never gone while it stays;
// (3) extra keys (multimodal hashes) cannot be re-split across blocks of
// another size: a store carrying any extra key other than on the first
// block of a chain (the cache salt, which goes on router block 0 on both
// sides) is skipped and counted (reason "resized_extra_keys"), and so is
// one whose first block carries anything but the salt when E > R (that
// block spans several router blocks; at E <= R it lies within router
// block 0, where its multimodal items go on both sides); (4) when E is
// not a multiple of R, the remembered engine blocks are bounded per endpoint
// (ApplierConfig.MaxResizedBlocksPerEndpoint) and are not checkpointed: a
// store whose parent was forgotten is dropped (parent_missing) and a
// removal or tier-only store naming only forgotten hashes is counted
// (reason "resized_unmapped") — their router blocks stay until the index's
// own capacity or memory bound, or a clear, removes them.

// Reasons of stores_skipped_total for events of another block size.
const (
	skipResizedExtraKeys Reason = "resized_extra_keys" // extra keys that cannot be re-split at a block size not the index's (resizedExtra)
	skipResizedUnmapped  Reason = "resized_unmapped"   // a removal or tier-only store naming engine blocks the Applier no longer maps
)

// DefaultMaxResizedBlocksPerEndpoint is the default of
// ApplierConfig.MaxResizedBlocksPerEndpoint.
const DefaultMaxResizedBlocksPerEndpoint = 1 << 17

// synthHash is the engine hash under which the index holds the c-th router
// block completed by engine block eh of an endpoint whose block size is not
// the index's (SplitMix64's finaliser over the pair, so distinct pairs give
// unrelated hashes).
func synthHash(eh uint64, c int) uint64 {
	x := eh ^ (uint64(c)+1)*0x9E3779B97F4A7C15
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}

// engineBlockSize is the block size of endpoint's removals (which carry
// none): that of its last store, else the configured one, else the index's.
func (a *Applier) engineBlockSize(endpoint string, st *endpointState) int {
	if st.engBS > 0 {
		return st.engBS
	}
	if n, ok := a.sizes.Load(endpoint); ok && n > 0 {
		return n
	}
	return a.bs
}

// setBlockSize records endpoint's configured engine block size (0 forgets
// it), used for its removals until a store tells it. A size other than the
// index's also caps the endpoint's matches to whole engine blocks
// (kvindex.Index.SetEngineBlockSize) unless the index already has the
// endpoint's size from a store: blocks restored from a checkpoint, which
// does not hold the size, are capped before the engine stores again.
func (a *Applier) setBlockSize(endpoint string, n int) {
	if n <= 0 {
		a.sizes.Delete(endpoint)
		return
	}
	a.sizes.Store(endpoint, n)
	if n != a.bs && a.ix.EngineBlockSize(endpoint) == a.bs {
		a.ix.SetEngineBlockSize(endpoint, n)
	}
}

// resizedExtra returns the extra keys of router block 0 for a store of
// another block size, or ok=false when the store has extra keys that
// cannot be re-split: any beyond the first block of a chain, and, when an
// engine block is larger than a router block (larger), any on the first
// block but the cache salt. Such a block spans several router blocks and
// its multimodal items (or prompt-embedding hash) belong to those their
// tokens overlap, which the event does not say; the salt belongs to router
// block 0 alone. vLLM writes the salt after the multimodal keys, so a
// block whose keys (the adapter's name removed) are more than one, or
// one in a multimodal, bytes or unknown form, holds something else; a
// lone string is taken for the salt (the bare identifier of vLLM
// releases before the [identifier, offset] form cannot be told from it).
func resizedExtra(e *wire.Event, ek [][]string, larger bool) (first []string, ok bool) {
	for i, keys := range ek {
		if len(keys) == 0 {
			continue
		}
		if i > 0 || e.HasParent {
			return nil, false
		}
		if larger && (len(keys) > 1 || len(e.ExtraKeys) > 0 && !saltOnly(e.ExtraKeys[0])) {
			return nil, false
		}
		first = keys
	}
	return first, true
}

// saltOnly reports whether keys hold nothing but strings, salts and LoRA
// names: no multimodal, bytes or unknown key.
func saltOnly(keys []wire.ExtraKey) bool {
	for _, k := range keys {
		switch k.Kind {
		case wire.ExtraKeyString, wire.ExtraKeySalt, wire.ExtraKeyLoRA:
		default:
			return false
		}
	}
	return true
}

// storeResized indexes a store whose block size is not the index's (see the
// comment at the top of this file). The caller checked the event itself.
func (a *Applier) storeResized(endpoint, model string, st *endpointState, e *wire.Event, ek [][]string, group int, res *ApplyResult) {
	R, E, n := a.bs, e.BlockSize, len(e.BlockHashes)
	st.engBS = E
	a.ix.SetEngineBlockSize(endpoint, E) // Match caps it to whole engine blocks
	salt, ok := resizedExtra(e, ek, E > R)
	if !ok {
		a.skip(res, e.Kind, skipResizedExtraKeys, n)
		return
	}
	if len(e.TokenIDs) == 0 {
		a.storeTierResized(endpoint, st, e, group, res)
		return
	}
	ratio := E%R == 0
	var (
		left      []uint32
		parent    uint64
		hasParent bool
	)
	if e.HasParent {
		if ratio {
			parent, hasParent = synthHash(e.ParentHash, E/R-1), true
		} else {
			pe, ok := st.side.get(e.ParentHash)
			if !ok {
				a.parentMissing(endpoint, e, res)
				return
			}
			left, parent, hasParent = pe.left, pe.synth, pe.hasSynth
			if !hasParent {
				salt = pe.salt // the chain's first router block is still open
			}
		}
	}
	toks := e.TokenIDs
	if len(left) > 0 {
		st.toks = append(append(st.toks[:0], left...), e.TokenIDs...)
		toks = st.toks
	}
	lo, nr := len(left), len(toks)/R
	st.synth = st.synth[:0]
	for j, prev, c := 0, -1, 0; j < nr; j, c = j+1, c+1 {
		i := ((j+1)*R - 1 - lo) / E // the engine block holding the router block's last token
		if i != prev {
			prev, c = i, 0
		}
		st.synth = append(st.synth, synthHash(e.BlockHashes[i], c))
	}
	if nr > 0 {
		se := &st.se
		*se = kvindex.StoreEvent{
			EngineHashes: st.synth, ParentHash: parent, HasParent: hasParent,
			Tokens: toks[:nr*R], BlockSize: R, Model: model,
			Tier: normalizeMedium(e.Medium), Group: group, Kind: e.Kind,
		}
		// As at the index's block size: vLLM's offloading connector
		// repeats a chunk's tokens without its extra keys, so router
		// blocks the endpoint knows keep their key.
		se.KeepKnown = se.Tier != tierGPU && len(e.ExtraKeys) == 0
		if !hasParent && len(salt) > 0 {
			st.extra = append(st.extra[:0], salt)
			for len(st.extra) < nr {
				st.extra = append(st.extra, nil)
			}
			se.ExtraKeys = st.extra
		}
		err := a.ix.Store(endpoint, se)
		se.EngineHashes, se.Tokens, se.ExtraKeys = nil, nil, nil
		if err != nil {
			a.storeFailed(endpoint, e, err, res)
			return
		}
	}
	if !ratio {
		st.rememberResized(e, toks, lo, R, parent, hasParent, salt, a.maxSide)
	}
	res.Stored++
	res.StoredBlocks += n
}

// rememberResized records, for each engine block of a re-chunked store,
// what its children and removals need (sideEntry).
func (st *endpointState) rememberResized(e *wire.Event, toks []uint32, lo, R int, parent uint64, hasParent bool, salt []string, max int) {
	if st.side == nil {
		st.side = newSideTable(max)
	}
	E := e.BlockSize
	for i, eh := range e.BlockHashes {
		start, end := lo+i*E, lo+(i+1)*E
		full := end / R
		ent := sideEntry{synth: parent, hasSynth: hasParent, count: uint32(full - start/R)}
		if full > 0 {
			ent.synth, ent.hasSynth = st.synth[full-1], true
		}
		if !ent.hasSynth {
			ent.salt = salt
		}
		if end > full*R {
			ent.left = append([]uint32(nil), toks[full*R:end]...)
		}
		st.side.put(eh, ent)
	}
}

// storeTierResized applies a tier-only store (no tokens) of another block
// size: the router blocks its engine blocks complete gain the tier.
func (a *Applier) storeTierResized(endpoint string, st *endpointState, e *wire.Event, group int, res *ApplyResult) {
	n := len(e.BlockHashes)
	unknown := st.mapResized(e.BlockHashes, e.BlockSize, a.bs, true)
	if len(st.synth) == 0 {
		a.skip(res, e.Kind, skipResizedUnmapped, n)
		return
	}
	se := &st.se
	*se = kvindex.StoreEvent{EngineHashes: st.synth, BlockSize: a.bs, Tier: normalizeMedium(e.Medium), Group: group, Kind: e.Kind}
	err := a.ix.Store(endpoint, se)
	se.EngineHashes = nil
	if err != nil && unknown == 0 {
		a.storeFailed(endpoint, e, err, res)
		return
	}
	res.Stored++
	res.StoredBlocks += n - unknown
	if unknown > 0 {
		res.SkippedBlocks += unknown
		a.m.skip(e.Kind, skipResizedUnmapped, 1)
	}
}

// mapResized fills st.synth with the synthetic hashes of the router blocks
// the engine blocks hashes complete, at engine block size E and index block
// size R, and returns how many hashes it could not map. store adds a
// reference to each remembered engine block, a removal (store=false) takes
// one away, forgetting it at zero.
func (st *endpointState) mapResized(hashes []uint64, E, R int, store bool) (unknown int) {
	st.synth = st.synth[:0]
	if E%R == 0 {
		for _, h := range hashes {
			for c := 0; c < E/R; c++ {
				st.synth = append(st.synth, synthHash(h, c))
			}
		}
		return 0
	}
	for _, h := range hashes {
		cnt, ok := st.side.ref(h, store)
		if !ok {
			unknown++
			continue
		}
		for c := 0; c < int(cnt); c++ {
			st.synth = append(st.synth, synthHash(h, c))
		}
	}
	return unknown
}

// removeResized applies a removal of an endpoint whose block size is not
// the index's.
func (a *Applier) removeResized(endpoint string, st *endpointState, e *wire.Event, E, group int, res *ApplyResult) {
	unknown := st.mapResized(e.BlockHashes, E, a.bs, false)
	if unknown == len(e.BlockHashes) {
		a.skip(res, "", skipResizedUnmapped, unknown)
		return
	}
	if unknown > 0 {
		res.SkippedBlocks += unknown
		a.m.skip("", skipResizedUnmapped, 1)
	}
	res.Removed++
	if len(st.synth) > 0 {
		res.RemovedBlocks += a.ix.Remove(endpoint, st.synth, normalizeMedium(e.Medium), group)
	}
}
