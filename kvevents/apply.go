package kvevents

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// maxGroupsPerEndpoint bounds the group → kind map of one endpoint (real
// engines have a handful of groups); groups beyond it are not remembered,
// so their removals are skipped as unknown_group.
const maxGroupsPerEndpoint = 256

// ApplierConfig configures an Applier.
type ApplierConfig struct {
	// Model is the model name used when Apply is called with an empty one
	// (for example an endpoint publishing on vLLM's default empty topic).
	Model string `json:"model"`
	// LoRANames maps vLLM's integer lora_id to the adapter name, for engines
	// that send lora_id without lora_name (vLLM 0.9 and other releases before
	// lora_name existed). A store of an adapter is keyed under the adapter's
	// name, never under the base model: without lora_name, a typed LoRA extra
	// key or an entry here, it is skipped and counted
	// (stores_skipped_total{reason="lora_unnamed"}), because keying it under
	// the base model would make base-model requests match adapter blocks.
	LoRANames map[int64]string `json:"loraNames,omitempty"`
	// MaxResizedBlocksPerEndpoint bounds, per endpoint, the engine blocks
	// the Applier remembers for an engine whose block size is not a
	// multiple of the index's (their chain state; see apply_resize.go).
	// 0 means DefaultMaxResizedBlocksPerEndpoint.
	MaxResizedBlocksPerEndpoint int `json:"maxResizedBlocksPerEndpoint,omitempty"`
	// SlidingWindow is the sliding window in tokens of the engines'
	// sliding-window cache groups, for events that do not carry
	// kv_cache_spec_sliding_window (0: such stores are skipped, reason
	// "no_sliding_window"). See apply_groups.go.
	SlidingWindow int `json:"slidingWindow,omitempty"`
}

// Options are the injected dependencies of a Pool or an Applier; the zero
// value is valid.
type Options struct {
	// Set is the observability bundle (see package telemetry):
	//   Registerer receives the component's metrics; nil registers none.
	//   Logger receives state changes and debug logs for dropped events;
	//   nil discards.
	//   TracerProvider, for a Pool, traces a sample of the KV-event
	//   messages (spans events_receive, events_process, events_decode)
	//   when PoolConfig.Tracing enables it; nil traces nothing at no cost.
	//   Clock, for a Pool, is the time source of its streams: when a phase
	//   or readiness state began (EndpointStatus.Since), and its timers,
	//   its sockets' heartbeats and its replay client's timeout and
	//   backoff; nil is the wall clock (telemetry.Wall).
	telemetry.Set
	// metrics, for the Pool's own Applier, is the Applier's part of the
	// Pool's metrics (shared so each family is registered once); it takes
	// precedence over Registerer.
	metrics *applyMetrics
	// Matcher, for a Pool, decides from an endpoint's labels whether it is
	// subscribed (nil subscribes every endpoint): a Kubernetes
	// labels.Selector's Matches, for instance, or the matcher a kvroute
	// Router builds from its events.selector.
	Matcher func(labels map[string]string) bool
}

// ApplyResult counts what Apply did with one batch. Every event of the batch
// lands in exactly one of Stored, Removed, Cleared, Skipped or Dropped. A
// tier-only store that named some unknown hashes counts as Stored; its
// unknown hashes are counted in SkippedBlocks and in stores_skipped_total
// (reason "unknown_hash").
type ApplyResult struct {
	Stored        int // BlockStored events applied
	StoredBlocks  int // blocks in those events
	Removed       int // BlockRemoved events applied
	RemovedBlocks int // memberships the index removed for them
	Cleared       int // AllBlocksCleared events applied
	ClearedBlocks int // memberships the index removed for them
	Skipped       int // events left out of the index (stores_skipped_total)
	SkippedBlocks int // blocks not indexed: those of skipped stores, the unknown hashes of partial tier-only stores, and the blocks from a store's first non-token on
	Dropped       int // events dropped (dropped_total): ParentMissing + Unknown
	ParentMissing int // stores whose parent the index does not know
	Unknown       int // events with an unknown tag
}

// Applier applies decoded batches to a kvindex.Index. It is safe for
// concurrent use; batches of one endpoint are applied one at a time, in
// call order, and batches of different endpoints in parallel.
//
// Per endpoint it remembers each cache group's kind (from its stores) so
// that removals can be classified: vLLM sends kv_cache_spec_kind only on
// BlockStored, never on BlockRemoved.
type Applier struct {
	ix    *kvindex.Index
	model string
	m     *applyMetrics
	log   *slog.Logger
	eps   *xsync.MapOf[string, *endpointState]
	loras map[int64]string // read-only after NewApplier

	bs      int                       // the index's block size
	maxSide int                       // ApplierConfig.MaxResizedBlocksPerEndpoint
	window  int                       // ApplierConfig.SlidingWindow
	sizes   *xsync.MapOf[string, int] // configured engine block sizes (Endpoint.BlockSize)
}

// endpointState is what the Applier keeps per endpoint: group kinds and
// scratch buffers (reused, so applying does not allocate in steady state).
type endpointState struct {
	mu     sync.Mutex
	groups map[int]string
	se     kvindex.StoreEvent
	extra  [][]string
	flat   []string
	ends   []int
	pos    []byte // encoded position (applyAt)

	// Engines of another block size (apply_resize.go).
	engBS int        // block size of the last store (0: none yet)
	side  *sideTable // engine blocks of a size not a multiple of the index's
	synth []uint64   // scratch: synthetic hashes
	toks  []uint32   // scratch: a parent's leftover tokens and the store's

	// Group stores waiting for their full-attention blocks
	// (apply_groups_pending.go).
	pend        []pendingGroup
	pendN       int // pending hashes over pend
	pendScratch []uint64
	batches     uint64 // batches applied
}

// NewApplier returns an Applier writing to ix, with its injected
// dependencies.
func NewApplier(cfg ApplierConfig, ix *kvindex.Index, opts Options) (*Applier, error) {
	if ix == nil {
		return nil, errors.New("kvevents: NewApplier needs an index")
	}
	if cfg.MaxResizedBlocksPerEndpoint < 0 || cfg.SlidingWindow < 0 {
		return nil, errors.New("kvevents: ApplierConfig.MaxResizedBlocksPerEndpoint and SlidingWindow must be >= 0")
	}
	if cfg.MaxResizedBlocksPerEndpoint == 0 {
		cfg.MaxResizedBlocksPerEndpoint = DefaultMaxResizedBlocksPerEndpoint
	}
	m := opts.metrics
	if m == nil && opts.Registerer != nil {
		// Reused when already registered (another Applier or Pool on the
		// same registry), so an Applier, which has no Close, can be built
		// again on the same registry.
		r := &registrar{set: opts.Set}
		var err error
		if m, err = newApplyMetrics(r); err != nil {
			r.unregister()
			return nil, err
		}
	}
	log := opts.Log()
	return &Applier{ix: ix, model: cfg.Model, m: m, log: log, eps: xsync.NewMapOf[string, *endpointState](),
		loras: maps.Clone(cfg.LoRANames), bs: ix.BlockSize(), maxSide: cfg.MaxResizedBlocksPerEndpoint, window: cfg.SlidingWindow,
		sizes: xsync.NewMapOf[string, int]()}, nil
}

// metrics returns the Applier's metric set (nil without metrics), for the
// components that share it.
func (a *Applier) metrics() *applyMetrics { return a.m }

// forget drops what the Applier remembers about endpoint (its group kinds),
// for an endpoint that left the pool. It does not touch the index.
func (a *Applier) forget(endpoint string) {
	a.eps.Delete(endpoint)
	a.sizes.Delete(endpoint)
}

func (a *Applier) state(endpoint string) *endpointState {
	if st, ok := a.eps.Load(endpoint); ok {
		return st
	}
	st, _ := a.eps.LoadOrCompute(endpoint, func() *endpointState {
		return &endpointState{groups: make(map[int]string, 2)}
	})
	return st
}

// Apply applies batch b, received from endpoint, to the index. model is the
// endpoint's base model (from the topic or configuration; "" uses
// ApplierConfig.Model); an event's lora_name replaces it as the key root.
//
// BlockStored → Index.Store, BlockRemoved → Index.Remove, AllBlocksCleared
// → Index.Clear. Stores that cannot be indexed are skipped and counted in
// llm_d_epp_kv_cache_events_stores_skipped_total{cache_kind,reason}; stores
// whose parent is unknown and unknown event types are counted in
// kvroute_kv_events_dropped_total{pod_identifier,reason}.
func (a *Applier) Apply(endpoint, model string, b *wire.Batch) ApplyResult {
	var res ApplyResult
	if model == "" {
		model = a.model
	}
	st := a.state(endpoint)
	st.mu.Lock()
	defer st.mu.Unlock()
	if b.UnknownEvents > 0 {
		res.Unknown += b.UnknownEvents
		res.Dropped += b.UnknownEvents
		a.m.drop(endpoint, dropUnknownEvent, b.UnknownEvents)
	}
	for i := range b.Events {
		e := &b.Events[i]
		switch e.Type {
		case wire.EventBlockStored:
			a.store(endpoint, model, st, e, &res)
			if st.pendN > 0 {
				if _, group := kvindex.GroupKindOf(e.Kind); !group {
					a.resolvePending(endpoint, st)
				}
			}
		case wire.EventBlockRemoved:
			a.remove(endpoint, st, e, &res)
		case wire.EventAllBlocksCleared:
			st.side = nil
			st.dropPending()
			res.Cleared++
			res.ClearedBlocks += a.ix.Clear(endpoint)
		default:
			res.Unknown++
			res.Dropped++
			a.m.drop(endpoint, dropUnknownEvent, 1)
		}
	}
	a.endBatch(st, &res)
	return res
}

// eventGroup is the cache group an event belongs to. vLLM's own consumers
// read an absent group_idx as group 0 (the only group of a model without
// hybrid attention), and so does the Applier, for stores and removals
// alike: a block stored with group_idx=0 and removed without it (or the
// reverse) is removed. Engines that never send group_idx (SGLang, vLLM
// before group_idx existed) thus keep all their blocks in group 0.
// A negative group_idx is returned as is (malformed).
func eventGroup(e *wire.Event) int {
	if e.HasGroup {
		return e.Group
	}
	return 0
}

// applyAt is Apply with the endpoint's stream position recorded in the
// index atomically with the batch's effects: it holds the endpoint's
// kvindex.PositionLock across the whole batch, so a snapshot of the index
// holds either none or all of the batch, and pos exactly when it holds it
// (a resumed stream would otherwise apply reference-counted stores twice).
func (a *Applier) applyAt(endpoint, model string, b *wire.Batch, pos Position) ApplyResult {
	pl := a.ix.LockPosition(endpoint)
	res := a.Apply(endpoint, model, b)
	st := a.state(endpoint)
	st.mu.Lock()
	st.pos = appendPosition(st.pos[:0], pos, st.groups) // with the group kinds a resumed stream needs
	pl.Set(st.pos)
	st.mu.Unlock()
	pl.Unlock()
	return res
}

// restoreGroups gives endpoint the group kinds recorded with its position,
// for a stream resumed from it; groups it already knows are kept.
func (a *Applier) restoreGroups(endpoint string, groups map[int]string) {
	st := a.state(endpoint)
	st.mu.Lock()
	defer st.mu.Unlock()
	for g, k := range groups {
		if _, ok := st.groups[g]; !ok && len(st.groups) < maxGroupsPerEndpoint {
			st.groups[g] = k
		}
	}
}

// tooManyTokens reports whether n engine blocks of E tokens, each mapped to
// E / the index's block size router blocks, cover more than
// maxMappedTokens. Blocks no larger than the index's map to at most one
// router block each, and are bounded by the hash count alone.
func (a *Applier) tooManyTokens(n, E int) bool {
	return E > a.bs && n > maxMappedTokens/E
}

func (a *Applier) skip(res *ApplyResult, kind string, reason Reason, blocks int) {
	res.Skipped++
	res.SkippedBlocks += blocks
	a.m.skip(kind, reason, 1)
}

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

// adapter returns the LoRA adapter that roots a store's keys: lora_name,
// else the name of a typed LoRA extra key, else the configured name of
// lora_id. "" with named=true is the base model; named=false is an adapter
// (lora_id present) whose name is unknown.
func (a *Applier) adapter(e *wire.Event) (name string, named bool) {
	if e.LoRAName != "" {
		return e.LoRAName, true
	}
	for _, keys := range e.ExtraKeys {
		for _, k := range keys {
			if k.Kind == wire.ExtraKeyLoRA && k.Value != "" {
				return k.Value, true
			}
		}
	}
	if !e.HasLoRAID {
		return "", true
	}
	name, ok := a.loras[e.LoRAID]
	return name, ok && name != ""
}

// extraKeys converts the event's extra keys to the index's per-block string
// form (nil when no block has any): the adapter's name and typed LoRA keys
// are removed (the adapter is the key root instead), a multimodal
// [identifier, offset] pair becomes its identifier, bytes and opaque keys
// their hex. vLLM writes the adapter's name as the first extra key of every
// block of a LoRA request (then the multimodal items, the cache salt on
// block 0 and prompt-embedding hashes), so only a leading key equal to the
// adapter is its name: a later key that spells the same string, such as a
// salt chosen equal to the adapter's name, is kept as the key it is. SGLang's cache_salt becomes
// the last extra key of block 0 when the event starts at block 0 (no
// parent), which is where the request side puts the salt; later blocks
// inherit it through the parent chain.
func (st *endpointState) extraKeys(e *wire.Event, adapter string) [][]string {
	salt := e.CacheSalt != "" && !e.HasParent
	if len(e.ExtraKeys) == 0 && !salt {
		return nil
	}
	n := len(e.BlockHashes)
	st.flat, st.ends = st.flat[:0], st.ends[:0]
	for i := 0; i < n; i++ {
		if i < len(e.ExtraKeys) {
			for j, k := range e.ExtraKeys[i] {
				if k.Kind == wire.ExtraKeyLoRA || j == 0 && k.Kind == wire.ExtraKeyString && adapter != "" && k.Value == adapter {
					continue
				}
				st.flat = append(st.flat, k.Value)
			}
		}
		if i == 0 && salt {
			st.flat = append(st.flat, e.CacheSalt)
		}
		st.ends = append(st.ends, len(st.flat))
	}
	if len(st.flat) == 0 {
		return nil
	}
	st.extra = st.extra[:0]
	start := 0
	for _, end := range st.ends {
		var keys []string
		if end > start {
			keys = st.flat[start:end:end]
		}
		st.extra = append(st.extra, keys)
		start = end
	}
	return st.extra
}

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
