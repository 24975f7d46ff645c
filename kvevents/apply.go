package kvevents

import (
	"errors"
	"log/slog"
	"maps"
	"sync"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/kvindex"
)

// maxGroupsPerEndpoint bounds the group → kind map of one endpoint (real
// engines have a handful of groups); groups beyond it are not remembered,
// so their removals are skipped as unknown_group.
const maxGroupsPerEndpoint = 256

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
