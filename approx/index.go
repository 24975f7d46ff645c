package approx

import (
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
)

// ErrBound is returned by a second Index.Bind: an Index serves one router.
var ErrBound = errors.New("approx: index already bound to a router")

// Options are an Index's injected dependencies; the zero value is valid.
type Options struct {
	// Set: Registerer receives the index's metrics (nil registers none);
	// Clock is the clock of the entries' TTL and of the mode refresh (nil
	// is the wall clock); Logger receives a warning when an endpoint's
	// capacity falls back. TracerProvider is not used.
	telemetry.Set
	// Capacities, when set, reads each endpoint's capacity from its
	// engine (vLLM's vllm:cache_config_info, scraped by package
	// enginemetrics) at every mode refresh; Config.Endpoints still
	// override it, and Config.Capacity applies when the engine's is not
	// known (kvroute_approx_capacity_fallbacks_total). Nil: the configured
	// capacities only.
	Capacities CapacitySource
}

// Binding is what the router an Index serves tells it (Index.Bind).
type Binding struct {
	// Live reports whether an endpoint's KV-event stream is live (the index
	// of precise entries holds what the engine reported); nil means no
	// endpoint's is (KV events off). It is called on mode refreshes only,
	// never on the pick path, and never with the index's locks held.
	Live func(endpoint string) bool
	// BlockSize is the router's block size in tokens, the size the
	// capacities are converted to; 0 means 64.
	BlockSize int
}

// Index is a per-endpoint approximate prefix index fed by a router's own
// decisions, plus each endpoint's mode (precise, approximate or blind).
//
// Entries: Record files the block keys of a request under the endpoint it
// was sent to; Match returns how many leading keys of a prompt an endpoint
// is believed to hold. Each endpoint's entries are a least-recently-routed
// list bounded by its engine's capacity (Config.Capacity, Config.Endpoints,
// SetCapacity: GPU plus CPU-offload blocks), entries count for Config.TTL
// after the last decision that routed them, and the whole index is bounded
// by Config.MaxBytes of accounted memory. With Config.Enabled false the
// index holds nothing.
//
// Modes: once bound (Bind), the index reads each known endpoint's stream
// state (Binding.Live) every Config.Refresh, lazily, on the first Current
// call after the interval; an endpoint whose stream is live is precise and
// its approximate entries are dropped, one that is not is approximate (or
// blind when the index is not enabled).
//
// All methods are safe for concurrent use. The Index starts no goroutines:
// expiry runs in Record, Match and the refreshes.
type Index struct {
	cfg      Config
	clock    telemetry.Clock
	log      *slog.Logger
	src      CapacitySource
	ttl      int64
	slotCap  int64 // MaxBytes / slotBytes
	refreshD int64
	met      *metrics

	refreshMu sync.Mutex // serializes refreshCapacities: its resolve and its swap are one step

	mu        sync.RWMutex
	eps       map[string]*lru
	caps      map[string]Capacity         // explicit: Config.Endpoints, SetCapacity
	resolved  map[string]resolvedCapacity // by the last refresh (refreshCapacities)
	known     []string                    // sorted; SetEndpoints
	live      func(string) bool
	blockSize int

	bound      atomic.Bool
	static     atomic.Bool // bound, not enabled and no liveness: the modes change only with SetEndpoints
	view       atomic.Pointer[View]
	refreshing atomic.Bool
	slots      atomic.Int64 // over all endpoints
	entries    atomic.Int64
}

// EndpointState is one endpoint's part of Index.Endpoints.
type EndpointState struct {
	ID   string
	Mode Mode
	// Entries are the approximate entries held for the endpoint, Capacity
	// its capacity in the router's blocks.
	Entries, Capacity int
	// EngineCapacity is that capacity in the engine's terms (GPU and CPU
	// offload blocks, block size), CapacitySource where it came from
	// (CapacityConfig, CapacityEngine, CapacityEngineConfigCPU or
	// CapacityDefault) and CapacityFallback why it is not the engine's own
	// when it should be (a Fallback constant; empty when it is, or when no
	// capacity source is configured).
	EngineCapacity   Capacity
	CapacitySource   string
	CapacityFallback string
	// MetricsFailure is why the last read of the engine's metrics failed
	// (connection, timeout, http_status, ...; the capacity source's
	// reason), empty when it succeeded or was not attempted.
	MetricsFailure string
}

// Stats is the index's size.
type Stats struct {
	Endpoints int   // endpoints holding entries
	Entries   int   // entries over all endpoints
	Bytes     int64 // accounted memory
	MaxBytes  int64 // Config.MaxBytes
}

// New builds an Index from cfg (zero fields take the defaults).
func New(cfg Config, opts Options) (*Index, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	x := &Index{cfg: cfg, clock: opts.Clk(), log: opts.Log(), src: opts.Capacities, ttl: int64(cfg.TTL), slotCap: max(1, cfg.MaxBytes/slotBytes),
		refreshD: int64(cfg.Refresh), eps: map[string]*lru{}, caps: map[string]Capacity{}, blockSize: kvindex.DefaultBlockSize}
	for id, c := range cfg.Endpoints {
		x.caps[id] = c
	}
	if x.met, err = newMetrics(x, opts.Registerer); err != nil {
		return nil, err
	}
	x.view.Store(&View{})
	return x, nil
}

// Enabled reports whether the index keeps approximate entries
// (Config.Enabled).
func (x *Index) Enabled() bool { return x.cfg.Enabled }

// Config returns the index's configuration, defaults applied.
func (x *Index) Config() Config { return x.cfg }

// Bind ties the index to the router it serves and reads the endpoints'
// modes at once; ErrBound when it was bound before.
func (x *Index) Bind(b Binding) error {
	if !x.bound.CompareAndSwap(false, true) {
		return ErrBound
	}
	x.mu.Lock()
	x.live = b.Live
	if b.BlockSize > 0 {
		x.blockSize = b.BlockSize
	}
	x.mu.Unlock()
	x.refresh(x.clock.Now().UnixNano())
	x.static.Store(!x.cfg.Enabled && b.Live == nil)
	return nil
}

// SetEndpoints replaces the known endpoints (the router's): the mode table
// and the endpoint-mode metric cover them; the entries of endpoints no
// longer listed are dropped (reason "removed"). The modes are read again
// at once.
func (x *Index) SetEndpoints(ids []string) {
	known := slices.Clone(ids)
	slices.Sort(known)
	known = slices.Compact(known)
	x.mu.Lock()
	x.known = known
	var gone []string
	for id := range x.eps {
		if _, ok := slices.BinarySearch(known, id); !ok {
			gone = append(gone, id)
		}
	}
	x.mu.Unlock()
	for _, id := range gone {
		x.drop(id, reasonRemoved)
	}
	x.refresh(x.clock.Now().UnixNano())
}

// SetCapacity sets an endpoint's capacity (for example from its engine's
// metrics or configuration); it applies from the endpoint's next Record.
func (x *Index) SetCapacity(endpoint string, c Capacity) error {
	if err := c.validate("capacity of " + endpoint); err != nil {
		return err
	}
	if c.GPUBlocks == 0 {
		return errors.New("approx: capacity of " + endpoint + ": gpuBlocks is required")
	}
	x.mu.Lock()
	x.caps[endpoint] = c
	x.mu.Unlock()
	return nil
}

// capacityLocked is an endpoint's capacity in router blocks; x.mu held.
func (x *Index) capacityLocked(endpoint string) int {
	return x.resolvedLocked(endpoint).c.Blocks(x.blockSize)
}

// resolvedLocked is an endpoint's capacity: explicit, else as the last
// refresh resolved it, else Config.Capacity; x.mu held.
func (x *Index) resolvedLocked(endpoint string) resolvedCapacity {
	if c, ok := x.caps[endpoint]; ok {
		return resolvedCapacity{c: c, source: CapacityConfig}
	}
	if r, ok := x.resolved[endpoint]; ok {
		return r
	}
	return resolvedCapacity{c: x.cfg.Capacity, source: CapacityDefault}
}

// shard returns the endpoint's entries (created when absent), its limit of
// live entries and whether the limit is its memory share rather than its
// capacity.
func (x *Index) shard(endpoint string) (l *lru, limit int, byMemory bool) {
	x.mu.RLock()
	l = x.eps[endpoint]
	n := len(x.eps)
	capBlocks := x.capacityLocked(endpoint)
	x.mu.RUnlock()
	if l == nil {
		x.mu.Lock()
		if l = x.eps[endpoint]; l == nil {
			l = newLRU()
			x.eps[endpoint] = l
		}
		n = len(x.eps)
		x.mu.Unlock()
	}
	share := int(x.slotCap / int64(max(n, 1)))
	if share < capBlocks {
		return l, max(share, 1), true
	}
	return l, capBlocks, false
}

// Record files keys (one prompt's block keys, in prompt order) as held by
// endpoint from now on: a decision sent the request there, so the engine
// will hold them once it has computed the prompt. The prompt's first
// blocks become the most recently routed, so under capacity pressure an
// endpoint forgets the ends of prompts before their shared beginnings, as
// an engine's LRU does. A no-op when the index is not enabled.
func (x *Index) Record(endpoint string, keys []kvindex.Key) {
	if !x.cfg.Enabled || len(keys) == 0 {
		return
	}
	var (
		l        *lru
		limit    int
		byMemory bool
		now      int64
	)
	for {
		l, limit, byMemory = x.shard(endpoint)
		now = x.clock.Now().UnixNano()
		l.mu.Lock()
		if l.pos != nil {
			break
		}
		// Dropped meanwhile. An explicit drop (Drop, the endpoint removed
		// or precise) wins; a drop for being empty (expiry) does not
		// forget the endpoint, and this Record files its keys again.
		retry := l.expired
		l.mu.Unlock()
		if !retry {
			return
		}
	}
	slots0, n0 := l.slots(), l.n
	expired := l.expire(now - x.ttl)
	evicted := 0
	for i := len(keys) - 1; i >= 0; i-- {
		if l.touch(keys[i], now, limit) {
			evicted++
		}
	}
	if l.slots() > limit {
		evicted += l.shrink(limit)
	}
	dSlots, dN := l.slots()-slots0, l.n-n0
	l.mu.Unlock()
	x.slots.Add(int64(dSlots))
	x.entries.Add(int64(dN))
	x.met.recorded.Add(float64(len(keys)))
	x.met.evicted[reasonExpired].Add(float64(expired))
	if byMemory {
		x.met.evicted[reasonMemory].Add(float64(evicted))
	} else {
		x.met.evicted[reasonCapacity].Add(float64(evicted))
	}
	if x.slots.Load() > x.slotCap {
		x.enforce()
	}
}

// enforce brings every endpoint down to its memory share.
func (x *Index) enforce() {
	x.mu.RLock()
	ls := make([]*lru, 0, len(x.eps))
	for _, l := range x.eps {
		ls = append(ls, l)
	}
	x.mu.RUnlock()
	share := int(max(1, x.slotCap/int64(max(len(ls), 1))))
	for _, l := range ls {
		l.mu.Lock()
		if l.pos != nil && l.slots() > share {
			slots0, n0 := l.slots(), l.n
			k := l.shrink(share)
			x.slots.Add(int64(l.slots() - slots0))
			x.entries.Add(int64(l.n - n0))
			x.met.evicted[reasonMemory].Add(float64(k))
		}
		l.mu.Unlock()
	}
}

// Match returns how many leading keys of one prompt's block keys endpoint is
// believed to hold (entries routed there within the TTL); 0 when the index
// is not enabled or holds nothing for it.
func (x *Index) Match(endpoint string, keys []kvindex.Key) int {
	if !x.cfg.Enabled || len(keys) == 0 {
		return 0
	}
	x.mu.RLock()
	l := x.eps[endpoint]
	x.mu.RUnlock()
	if l == nil {
		return 0
	}
	cutoff := x.clock.Now().UnixNano() - x.ttl
	l.mu.RLock()
	n := 0
	if l.pos != nil {
		n = l.match(keys, cutoff)
	}
	l.mu.RUnlock()
	return n
}

// MatchCandidates is Match for every endpoint of endpoints that view says
// is approximate, into out (one entry per endpoint: its matched blocks, 0
// for the others); one clock read and one look-up of the endpoints for the
// whole list. out must be at least as long as endpoints.
func (x *Index) MatchCandidates(keys []kvindex.Key, endpoints []string, view *View, out []int) {
	out = out[:len(endpoints)]
	clear(out)
	if !x.cfg.Enabled || len(keys) == 0 {
		return
	}
	cutoff := x.clock.Now().UnixNano() - x.ttl
	x.mu.RLock()
	defer x.mu.RUnlock()
	if len(x.eps) == 0 {
		return
	}
	for i, id := range endpoints {
		l := x.eps[id] // most candidates of a mixed fleet have none: checked first
		if l == nil || view.Mode(id) != ModeApproximate {
			continue
		}
		l.mu.RLock()
		if l.pos != nil {
			out[i] = l.match(keys, cutoff)
		}
		l.mu.RUnlock()
	}
}

// Drop removes every approximate entry of endpoint and returns how many
// there were (counted as reason "dropped").
func (x *Index) Drop(endpoint string) int { return x.drop(endpoint, reasonDropped) }

func (x *Index) drop(endpoint string, reason int) int {
	x.mu.Lock()
	l := x.eps[endpoint]
	delete(x.eps, endpoint)
	x.mu.Unlock()
	if l == nil {
		return 0
	}
	l.mu.Lock()
	n, slots := l.n, l.slots()
	l.pos, l.nodes, l.n = nil, nil, 0 // a Record holding l sees it dropped
	l.head, l.tail, l.free = none, none, none
	l.mu.Unlock()
	x.slots.Add(-int64(slots))
	x.entries.Add(-int64(n))
	x.met.evicted[reason].Add(float64(n))
	return n
}

// Entries returns how many approximate entries endpoint holds.
func (x *Index) Entries(endpoint string) int {
	x.mu.RLock()
	l := x.eps[endpoint]
	x.mu.RUnlock()
	if l == nil {
		return 0
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.n
}

// Stats returns the index's size.
func (x *Index) Stats() Stats {
	x.mu.RLock()
	n := len(x.eps)
	x.mu.RUnlock()
	return Stats{Endpoints: n, Entries: int(x.entries.Load()), Bytes: x.slots.Load() * slotBytes, MaxBytes: x.cfg.MaxBytes}
}

// Endpoints returns every known endpoint's mode, entries and capacity,
// sorted by ID, for status pages.
func (x *Index) Endpoints() []EndpointState {
	v := x.Current()
	x.mu.RLock()
	ids := x.known
	out := make([]EndpointState, 0, len(ids))
	for _, id := range ids {
		r := x.resolvedLocked(id)
		out = append(out, EndpointState{ID: id, Mode: v.Mode(id), Capacity: r.c.Blocks(x.blockSize),
			EngineCapacity: r.c, CapacitySource: r.source, CapacityFallback: r.fallback, MetricsFailure: r.failure})
	}
	x.mu.RUnlock()
	for i := range out {
		out[i].Entries = x.Entries(out[i].ID)
	}
	return out
}

// expireAll removes expired entries everywhere and forgets endpoints left
// empty; the mode refresh runs it.
func (x *Index) expireAll(now int64) {
	x.mu.RLock()
	ids := make([]string, 0, len(x.eps))
	ls := make([]*lru, 0, len(x.eps))
	for id, l := range x.eps {
		ids, ls = append(ids, id), append(ls, l)
	}
	x.mu.RUnlock()
	for i, l := range ls {
		l.mu.Lock()
		empty := false
		if l.pos != nil {
			n0 := l.n
			k := l.expire(now - x.ttl)
			x.entries.Add(int64(l.n - n0))
			x.met.evicted[reasonExpired].Add(float64(k))
			empty = l.n == 0
		}
		l.mu.Unlock()
		if empty {
			x.dropExpired(ids[i], l)
		}
	}
}

// dropExpired forgets endpoint, which expireAll found with l empty, when l
// is still its lru and still empty: a Record may have filled it since
// expireAll unlocked it, so both are checked again under x.mu and l's lock
// (taken in that order, as everywhere). A Record holding l that has not yet
// locked it finds it expired and records in a new lru.
func (x *Index) dropExpired(endpoint string, l *lru) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.eps[endpoint] != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pos == nil || l.n != 0 {
		return
	}
	delete(x.eps, endpoint)
	slots := l.slots()
	l.pos, l.nodes, l.expired = nil, nil, true
	l.head, l.tail, l.free = none, none, none
	x.slots.Add(-int64(slots)) // no entries left to count
}

// now is the index clock as unix ns.
func (x *Index) now() int64 { return x.clock.Now().UnixNano() }
