package kvindex

import "errors"

// Errors of rejected or partly applied stores. Store returns them wrapped
// in a *StoreError; test with errors.Is.
var (
	// ErrParentMissing: the event's parent engine hash is not known for
	// this endpoint (the router joined late, or an event was lost). Nothing
	// of the event is indexed: chaining it off anything else would index
	// wrong keys.
	ErrParentMissing = errors.New("kvindex: parent block hash unknown for this endpoint")
	// ErrBlockSizeMismatch: the event's block size differs from the
	// index's. Store does not re-chunk: kvevents' Applier re-chunks the
	// events of engines of another block size before they reach it, so a
	// mismatch here is a caller's error.
	ErrBlockSizeMismatch = errors.New("kvindex: event block size differs from the index block size")
	// ErrNotIndexable: the event's cache group is not prefix-shaped
	// (sliding window, Mamba, …), so its blocks say nothing about prefix
	// reuse.
	ErrNotIndexable = errors.New("kvindex: cache group kind is not prefix-indexable")
	// ErrNonDense: the token span does not cover exactly one block per
	// engine hash (sliding-window and Mamba groups skip blocks).
	ErrNonDense = errors.New("kvindex: token span is not dense")
	// ErrUnknownHash: a tier-only store (engine hashes without tokens)
	// named hashes this endpoint never stored. The known ones are applied.
	ErrUnknownHash = errors.New("kvindex: engine block hash unknown for this endpoint")
	// ErrMalformed: the event is inconsistent in itself (extra keys not one
	// per block, group index below -1 or above 254).
	ErrMalformed = errors.New("kvindex: malformed store event")
)

// Reason says why an event, or part of one, was not indexed. Its values are
// stable metric label values: the reason label of
// llm_d_epp_kv_cache_events_stores_skipped_total and of
// kvroute_kv_events_dropped_total. The index's own reasons are those of a
// StoreError; kvevents adds those of the events the index never sees
// (kvevents.Reason is this type).
type Reason string

// Reasons of a StoreError.
const (
	// ReasonNonPrefixKind: ErrNotIndexable, a cache group that is not
	// prefix-shaped.
	ReasonNonPrefixKind Reason = "non_prefix_kind"
	// ReasonBlockSizeMismatch: ErrBlockSizeMismatch.
	ReasonBlockSizeMismatch Reason = "block_size_mismatch"
	// ReasonNonDense: ErrNonDense, not one block of tokens per engine hash.
	ReasonNonDense Reason = "non_dense"
	// ReasonParentMissing: ErrParentMissing, the parent block is unknown
	// for the endpoint.
	ReasonParentMissing Reason = "parent_missing"
	// ReasonUnknownHash: ErrUnknownHash, a tier-only store naming hashes the
	// endpoint never stored.
	ReasonUnknownHash Reason = "unknown_hash"
	// ReasonMalformed: ErrMalformed, an event inconsistent in itself.
	ReasonMalformed Reason = "malformed"
	// ReasonTooManyEndpoints: the index holds its maximum of endpoints.
	ReasonTooManyEndpoints Reason = "too_many_endpoints"
)

// StoreError is a store the index rejected (or, for ErrUnknownHash, applied
// only in part). Reason is a stable metric label, Kind the event's cache
// group kind, Err one of the package's sentinel errors.
type StoreError struct {
	Reason Reason
	Kind   string
	Err    error
	// Skipped is the number of blocks not indexed: all of them, except for
	// ErrUnknownHash where it counts the unknown hashes only.
	Skipped int
}

// Error describes the rejection.
func (e *StoreError) Error() string {
	if e.Kind != "" {
		return e.Err.Error() + " (reason " + string(e.Reason) + ", kind " + e.Kind + ")"
	}
	return e.Err.Error() + " (reason " + string(e.Reason) + ")"
}

// Unwrap returns the sentinel error.
func (e *StoreError) Unwrap() error { return e.Err }

// StoreEvent is one BlockStored event as the index needs it. Decoders fill
// it from vLLM or SGLang events; the index neither decodes nor
// retains it.
type StoreEvent struct {
	EngineHashes []uint64   // one per block, already normalised to uint64 (as kvevents does)
	ParentHash   uint64     // engine hash of the block before the first one
	HasParent    bool       // false when the first block is block 0 of the sequence
	Tokens       []uint32   // len == len(EngineHashes)*BlockSize, or empty for a tier-only (offload) store
	BlockSize    int        // the event's block size; must equal the index's
	Model        string     // chain root name: LoRA name when the event has one, else the endpoint's model
	ExtraKeys    [][]string // nil, or one entry per block (nil entry = none); LoRA names already removed
	Tier         string     // medium, case-insensitive; "" means "gpu"; at most 8 distinct tiers are told apart
	Group        int        // cache group index, at most 254; -1 = ungrouped
	Kind         string     // kv_cache_spec_kind; "" = not reported (indexed)
	// KeepKnown marks a store whose extra keys may be missing (vLLM's
	// offloading connector repeats a chunk's tokens without them): a hash
	// the endpoint already maps keeps its key, and the chain goes on from
	// it, instead of being keyed anew from the tokens alone.
	KeepKnown bool
}

// IndexableKind reports whether blocks of a cache group kind can be indexed
// as prefixes: full_attention, mla_attention, sink_full_attention, and ""
// (ungrouped events, and engines that do not report a kind).
func IndexableKind(kind string) bool {
	switch kind {
	case "", "full_attention", "mla_attention", "sink_full_attention":
		return true
	}
	return false
}

// Store indexes the blocks of a BlockStored event for endpoint.
//
// With tokens, the chain starts at the key of the parent engine hash —
// resolved through this endpoint's own engine-hash map — or at
// RootKey(ev.Model) without a parent, and block i's key is
// ChainKey(previous, its tokens, ev.ExtraKeys[i]). Each engine hash is
// mapped to its key and the endpoint gains (ev.Tier, ev.Group) on the block,
// superseding a speculative entry. Stores are reference-counted per
// (endpoint, tier, group, block), so a block announced twice — two GPU copies
// cached by vLLM in one step, or an offloading connector's overlapping
// chunks — needs two removals.
//
// With KeepKnown, a hash the endpoint already maps keeps its key (the chain
// goes on from it) rather than being keyed anew from tokens whose extra
// keys the event left out.
//
// Without tokens (an offload to another tier), the hashes are resolved
// through the endpoint's map and gain the tier; unknown hashes are skipped
// and reported as ErrUnknownHash with their count, the others are applied.
//
// A rejected event (ErrNotIndexable, ErrBlockSizeMismatch, ErrNonDense,
// ErrMalformed, ErrParentMissing, and ErrUnknownHash for an endpoint the
// index does not know) leaves no trace: it indexes nothing, registers no
// endpoint and no tier. After storing, the endpoint's oldest blocks are
// evicted while it holds more than Config.MaxBlocksPerEndpoint engine
// hashes, and then, while the index accounts more than Config.MaxBytes,
// the largest endpoint's oldest blocks (see Config.MaxBytes).
func (ix *Index) Store(endpoint string, ev *StoreEvent) error {
	err := ix.store(endpoint, ev)
	if ix.nBytes.Load() > ix.maxBytes {
		ix.enforceMemory()
	}
	return err
}

// store is Store before the memory bound is enforced.
func (ix *Index) store(endpoint string, ev *StoreEvent) error {
	if err := ix.validate(ev); err != nil {
		return err
	}
	if len(ev.EngineHashes) == 0 {
		return nil
	}
	// Only a store without a parent can start an endpoint: a parent, or a
	// tier-only store's hashes, cannot be known for an unknown endpoint.
	ep, err := ix.lockEndpoint(endpoint, len(ev.Tokens) != 0 && !ev.HasParent)
	switch {
	case err != nil:
		return &StoreError{Reason: ReasonTooManyEndpoints, Kind: ev.Kind, Err: err, Skipped: len(ev.EngineHashes)}
	case ep == nil && len(ev.Tokens) == 0:
		return &StoreError{Reason: ReasonUnknownHash, Kind: ev.Kind, Err: ErrUnknownHash, Skipped: len(ev.EngineHashes)}
	case ep == nil:
		return &StoreError{Reason: ReasonParentMissing, Kind: ev.Kind, Err: ErrParentMissing, Skipped: len(ev.EngineHashes)}
	}
	defer ep.mu.Unlock()
	defer ix.account(ep)
	group := int32(ev.Group)
	if len(ev.Tokens) == 0 {
		return ix.storeTierOnly(ep, ev, group)
	}
	var parent Key
	if ev.HasParent {
		k, ok := ep.eng.Get(ev.ParentHash)
		if !ok {
			return &StoreError{Reason: ReasonParentMissing, Kind: ev.Kind, Err: ErrParentMissing, Skipped: len(ev.EngineHashes)}
		}
		parent = k
	} else {
		if ep.rootName != ev.Model || ep.rootKey == 0 {
			ep.rootName, ep.rootKey = ev.Model, RootKey(ev.Model)
		}
		parent = ep.rootKey
	}
	tier, _ := ix.tierID(ev.Tier, true)
	var h blockHasher
	bs := ix.blockSize
	op := memberOp{kind: opAdd, tier: tier, group: group}
	for i, eh := range ev.EngineHashes {
		var extra []string
		if len(ev.ExtraKeys) > 0 {
			extra = ev.ExtraKeys[i]
		}
		key, kept := Key(0), false
		if ev.KeepKnown {
			key, kept = ep.eng.Get(eh)
		}
		if !kept {
			key = h.key(parent, ev.Tokens[i*bs:(i+1)*bs], extra, "", "")
		}
		old, known := ep.eng.Put(eh, key)
		if known && old != key {
			// The engine reuses a hash for other content (e.g. another
			// model root): the old mapping's membership is stale.
			ix.apply(ep, old, &memberOp{kind: opDrop})
		}
		op.findOther, op.other = !known || old != key, 0
		ix.apply(ep, key, &op)
		if op.other != 0 {
			ix.shareEntry(ep, eh, key, op.other)
		}
		parent = key
	}
	ix.enforceCapacity(ep)
	return nil
}

// validate rejects events that must not be indexed, before any side effect.
func (ix *Index) validate(ev *StoreEvent) error {
	switch {
	case ev == nil:
		return &StoreError{Reason: ReasonMalformed, Err: ErrMalformed}
	case !IndexableKind(ev.Kind):
		return &StoreError{Reason: ReasonNonPrefixKind, Kind: ev.Kind, Err: ErrNotIndexable, Skipped: len(ev.EngineHashes)}
	case ev.BlockSize != ix.blockSize:
		return &StoreError{Reason: ReasonBlockSizeMismatch, Kind: ev.Kind, Err: ErrBlockSizeMismatch, Skipped: len(ev.EngineHashes)}
	case len(ev.Tokens) != 0 && len(ev.Tokens) != len(ev.EngineHashes)*ix.blockSize:
		return &StoreError{Reason: ReasonNonDense, Kind: ev.Kind, Err: ErrNonDense, Skipped: len(ev.EngineHashes)}
	case len(ev.ExtraKeys) != 0 && len(ev.ExtraKeys) != len(ev.EngineHashes),
		ev.Group < -1 || ev.Group > maxGroupIndex:
		return &StoreError{Reason: ReasonMalformed, Kind: ev.Kind, Err: ErrMalformed, Skipped: len(ev.EngineHashes)}
	}
	return nil
}

// storeTierOnly adds a tier to blocks the endpoint already stored. The tier
// is registered only when a hash is known.
func (ix *Index) storeTierOnly(ep *endpoint, ev *StoreEvent, group int32) error {
	unknown := 0
	op := memberOp{kind: opAdd, group: group}
	tierKnown := false
	for _, eh := range ev.EngineHashes {
		key, ok := ep.eng.Get(eh)
		if !ok {
			unknown++
			continue
		}
		if !tierKnown {
			op.tier, _ = ix.tierID(ev.Tier, true)
			tierKnown = true
		}
		ix.apply(ep, key, &op)
	}
	if unknown > 0 {
		return &StoreError{Reason: ReasonUnknownHash, Kind: ev.Kind, Err: ErrUnknownHash, Skipped: unknown}
	}
	return nil
}

// enforceCapacity evicts the endpoint's oldest stored blocks (in the order
// their engine hashes were first stored; a hash removed and stored again
// counts from its new store) while it holds more engine hashes than allowed.
// ep.mu is held.
func (ix *Index) enforceCapacity(ep *endpoint) {
	for ep.eng.Len() > ix.maxBlocks && ix.evictOldest(ep, &ix.evCapacity) {
	}
}

// Remove applies a BlockRemoved event: each engine hash of endpoint loses
// one store of (tier, group). A block keeps the endpoint while any other
// (tier, group) holds it; an engine hash is forgotten when nothing holds its
// block any more. It returns the number of hashes whose (tier, group) entry
// disappeared (a reference-counted entry stored twice disappears on the
// second removal). Unknown endpoints, hashes and tiers, and groups Store
// does not take, are ignored.
func (ix *Index) Remove(endpoint string, hashes []uint64, tier string, group int) (removed int) {
	if len(hashes) == 0 {
		return 0
	}
	tid, ok := ix.tierID(tier, false)
	if !ok || group < -1 || group > maxGroupIndex {
		return 0
	}
	ep, _ := ix.lockEndpoint(endpoint, false)
	if ep == nil {
		return 0
	}
	defer ep.mu.Unlock()
	defer ix.account(ep)
	for _, h := range hashes {
		key, ok := ep.eng.Get(h)
		if !ok {
			continue
		}
		op := memberOp{kind: opRemove, tier: tid, group: int32(group)}
		ix.apply(ep, key, &op)
		if op.pairGone {
			removed++
		}
		if op.after == 0 {
			ep.eng.Delete(h)
		}
	}
	return removed
}

// Clear removes every block of endpoint — all tiers, groups and speculative
// entries — in time proportional to that endpoint's blocks, and forgets the
// endpoint (its engine-hash map and its ID). It returns the number of
// memberships removed, which are also counted as evictions with reason
// "endpoint_removed" whether the caller clears because the engine reported
// AllBlocksCleared, restarted, or left the pool.
func (ix *Index) Clear(endpoint string) (removed int) {
	ep, _ := ix.lockEndpoint(endpoint, false)
	if ep == nil {
		ix.clearGroups(endpoint)
		ix.SetEngineBlockSize(endpoint, 0)
		return 0
	}
	defer ep.mu.Unlock()
	drop := func(key Key) {
		op := memberOp{kind: opDrop}
		ix.apply(ep, key, &op)
		if op.before != 0 {
			removed++
		}
	}
	ep.eng.Each(func(_ uint64, key Key) { drop(key) })
	for _, e := range ep.spec {
		if v, ok := ix.blocks.Load(e.key); ok {
			if m, _ := v.find(ep.id); m != 0 {
				drop(e.key)
			}
		}
	}
	// The groups go after the blocks, so that a Match that finds them
	// gone finds the blocks gone too (one that read the groups before
	// reads them dead, see limitHybrid), and under the endpoint's lock,
	// which StoreGroup records them under: a group store cannot slip in
	// between them and the blocks.
	ix.clearGroups(endpoint)
	// The engine block size too: a Match that resolved its candidates
	// before it went still rounds the blocks it sees down.
	ix.SetEngineBlockSize(endpoint, 0)
	ep.eng.Reset()
	ep.cx, ep.cxExtra, ep.spec = nil, 0, nil
	ix.account(ep)
	ix.evEndpoint.Add(uint64(removed))
	ix.unregister(ep)
	return removed
}

// maxGroupIndex is the highest cache group index Store and Remove take:
// with the ungrouped -1, 256 groups, each in up to 8 tiers, which is what
// a snapshot reader accepts for one membership (maxSnapshotPairs). Engines
// number their KV-cache groups from 0, a handful per model.
const maxGroupIndex = 254
