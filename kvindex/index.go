package kvindex

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/kvroute/kvroute/telemetry"
)

// idReuseDelay is how many freed endpoint IDs wait before the oldest is
// reused. Endpoint IDs are reused so they stay dense (Match indexes a scratch
// array by ID), but only long after the endpoint was cleared, so that a
// Match that resolved the old name concurrently never sees the ID's new
// owner.
const idReuseDelay = 1024

// Index records which endpoint holds which KV blocks, keyed by router block
// keys, and answers longest-prefix matches for a set of candidate endpoints.
//
// All methods are safe for concurrent use. Match is lock-free over the
// block map: it reads it (a sharded open-addressing table of immutable
// values) with atomic loads and never waits for its writers. The one lock
// it takes is the read lock of a candidate's non-prefix cache groups
// (groups.go), after the walk and only for a candidate that has some,
// where it waits for a writer of those groups (a group store or removal,
// or memory eviction of that endpoint). Writers for one endpoint
// serialise on that endpoint's mutex; writers for different endpoints only
// meet in the block map's per-shard locks.
//
// Ownership: the one goroutine an Index starts is the speculative sweeper
// (New starts it unless Config.SweepInterval is negative). It owns its
// ticker and nothing else: every tick it calls Sweep, a writer like any
// other, which takes each endpoint's mutex in turn. Close closes stop once
// (closeOnce) and waits for the sweeper to close done; without a sweeper
// New closes done itself.
type Index struct {
	blockSize  int
	maxBlocks  int
	maxBytes   int64
	specWeight float64
	specTTL    time.Duration
	clock      telemetry.Clock // of expiry and of the sweeper's ticks
	now        func() time.Time
	epoch      time.Time

	blocks  *blockMap
	eps     *xsync.MapOf[string, *endpoint]
	byID    *xsync.MapOf[uint32, *endpoint] // the live endpoints by ID, for sharing engine-hash entries
	engBS   *xsync.MapOf[string, int]       // engine block sizes other than blockSize (engine_blocks.go)
	hybrid  *xsync.MapOf[string, *hybridEP] // non-prefix cache groups (groups.go)
	nHybrid atomic.Int64                    // groups in hybrid
	pool    *engPool                        // engine-hash entries shared by endpoints (engpool.go)

	regMu      sync.Mutex // guards nextID, freeIDs and registration
	nextID     uint32
	freeIDs    []uint32
	gen        atomic.Uint64 // bumped whenever the name → ID mapping changes
	maxID      atomic.Uint32
	nEndpoints atomic.Int64

	positions sync.Map // endpoint name → *PositionLock (snapshot_position.go)

	tierMu sync.Mutex // serialises tier registration
	tiers  atomic.Pointer[tierTable]

	nBlocks, nMembers, nSpec          atomic.Int64
	nBytes                            atomic.Int64 // accounted bytes, the sum of the endpoints' (membound.go)
	memMu                             sync.Mutex   // serialises memory eviction
	evCapacity, evExpired, evEndpoint atomic.Uint64
	evMemory                          atomic.Uint64
	met                               *metrics
	closeOnce                         sync.Once
	set                               telemetry.Set // whose Registerer Close unregisters the metrics from
	stop, done                        chan struct{}
}

// endpoint is the per-endpoint write-side state. Everything in it is
// guarded by mu; Match never touches it.
type endpoint struct {
	name string
	id   uint32

	mu   sync.Mutex
	dead bool // cleared and unregistered: writers must look the name up again

	// eng maps this endpoint's engine block hashes to router keys. It
	// resolves only the mappings this endpoint stored: engines serving
	// different models produce the same hashes for the same tokens, so a
	// map shared across endpoints would chain one model's blocks off
	// another's keys. Only the storage of a (hash, key) pair that several
	// endpoints each stored is shared (engTable, engPool).
	eng *engTable // also keeps first-store order, for capacity eviction

	spec    []specEntry // speculative entries to expire, unordered
	specMin uint64      // lowest expiry in spec (ms since epoch)

	cx      map[Key][]pair // (tier, group, count) pairs of complex memberships
	cxExtra int            // pairs in cx beyond complexPairs per entry (membound.go)
	scratch []pair
	arr     []uint64 // scratch member array of the block being updated

	rootName string // cache of the last chain root computed
	rootKey  Key

	members int          // memberships of this endpoint in the block map
	bytes   atomic.Int64 // accounted bytes (membound.go); written under mu, read by eviction
}

// specEntry is a speculative membership waiting to expire.
type specEntry struct {
	key Key
	exp uint64 // ms since epoch
}

// ErrTooManyEndpoints is returned (wrapped in a *StoreError) when the index
// already tracks the maximum number of endpoints (2^24 − 1).
var ErrTooManyEndpoints = errors.New("kvindex: too many endpoints")

// New creates an Index. The zero Config works (defaults documented on
// Config). When cfg.SweepInterval >= 0 it starts the speculative sweeper,
// which Close stops. It fails on an invalid Config or when the metrics
// cannot be registered.
func New(cfg Config, opts Options) (*Index, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ix := &Index{
		blockSize:  cfg.BlockSize,
		maxBlocks:  cfg.MaxBlocksPerEndpoint,
		maxBytes:   cfg.MaxBytes,
		specWeight: cfg.SpeculativeWeight,
		specTTL:    cfg.SpeculativeTTL,
		clock:      opts.Clk(),
		now:        opts.Clk().Now,
		blocks:     newBlockMap(rand.Uint64()),
		eps:        xsync.NewMapOf[string, *endpoint](),
		byID:       xsync.NewMapOf[uint32, *endpoint](),
		engBS:      xsync.NewMapOf[string, int](),
		hybrid:     xsync.NewMapOf[string, *hybridEP](),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		set:        opts.Set,
	}
	ix.epoch = ix.now()
	ix.pool = newEngPool(&ix.nBytes)
	ix.tiers.Store(newTierTable(cfg.TierWeights))
	if opts.Registerer != nil {
		if ix.met, err = newMetrics(ix, opts.Set); err != nil {
			return nil, err
		}
	}
	if cfg.SweepInterval > 0 {
		go ix.sweeper(cfg.SweepInterval)
	} else {
		close(ix.done)
	}
	return ix, nil
}

// Close stops the speculative sweeper, waits for it to exit and unregisters
// the metrics New registered, so another index can be built on the same
// registry. It is idempotent. The index stays usable (reads and writes still
// work; expiry is then enforced only by Match and explicit Sweep calls).
func (ix *Index) Close() {
	ix.closeOnce.Do(func() {
		close(ix.stop)
		if ix.met != nil {
			ix.set.Unregister(ix.met.cs...)
		}
	})
	<-ix.done
}

// BlockSize returns the number of tokens per block.
func (ix *Index) BlockSize() int { return ix.blockSize }

// Stats are point-in-time counters of an index.
type Stats struct {
	Blocks      int // distinct block keys held by at least one endpoint
	Memberships int // (block, endpoint) memberships, speculative included
	Endpoints   int // endpoints registered (stored or speculated, not cleared)
	Speculative int // memberships held only speculatively

	// Bytes is the index's accounted memory (kvroute_kv_index_bytes), the
	// quantity Config.MaxBytes bounds: a fixed cost per membership,
	// engine-hash entry (and its pair, when private), shared engine-hash
	// pair, complex-membership side-table entry and speculative entry,
	// close to the heap those entries take (the tables' fixed overhead, a
	// few hundred bytes per endpoint and 32 KiB per index, plus 128 KiB
	// once engine-hash pairs are shared, is not counted). It is zero when
	// the index holds nothing.
	Bytes int64

	// Entries removed by the index itself since New, by reason (the
	// kvroute_kv_index_evictions_total reasons).
	CapacityEvictions   uint64 // reason "capacity"
	SpeculativeExpiries uint64 // reason "speculative_expired"
	EndpointRemovals    uint64 // reason "endpoint_removed" (Clear)
	MemoryEvictions     uint64 // reason "memory" (Config.MaxBytes)
}

// Stats returns the current counters.
func (ix *Index) Stats() Stats {
	return Stats{
		Blocks:              int(ix.nBlocks.Load()),
		Memberships:         int(ix.nMembers.Load()),
		Endpoints:           int(ix.nEndpoints.Load()),
		Speculative:         int(ix.nSpec.Load()),
		Bytes:               ix.nBytes.Load(),
		CapacityEvictions:   ix.evCapacity.Load(),
		SpeculativeExpiries: ix.evExpired.Load(),
		EndpointRemovals:    ix.evEndpoint.Load(),
		MemoryEvictions:     ix.evMemory.Load(),
	}
}

// nowMs returns the index clock in milliseconds since the epoch (floor).
func (ix *Index) nowMs() uint64 {
	d := ix.now().Sub(ix.epoch)
	if d <= 0 {
		return 0
	}
	return uint64(d / time.Millisecond)
}

// expiryMs returns the expiry of an entry created now with the given TTL,
// rounded up to the next millisecond so an entry never expires early. A TTL
// beyond what the clock's offset leaves of a Duration (math.MaxInt64 for
// "never") is the latest expiry, not a sum wrapped negative.
func (ix *Index) expiryMs(ttl time.Duration) uint64 {
	e := ix.now().Sub(ix.epoch)
	if ttl > math.MaxInt64-time.Millisecond-max(e, 0) {
		return maxExpiry
	}
	d := e + ttl
	if d <= 0 {
		return 0
	}
	return uint64((d + time.Millisecond - 1) / time.Millisecond)
}

// hashKey is the block map's hash function. Keys are already mixed 64-bit
// hashes, so one seeded mixing round (MurmurHash3's finaliser) suffices; the
// per-map seed keeps bucket placement unpredictable to clients who choose
// prompts.
func hashKey(k Key, seed uint64) uint64 {
	h := uint64(k) ^ seed
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// lockEndpoint returns the live endpoint registered under name with its
// mutex held, registering it when create is set. It returns nil when the
// endpoint is unknown and create is false.
func (ix *Index) lockEndpoint(name string, create bool) (*endpoint, error) {
	for {
		ep, ok := ix.eps.Load(name)
		if !ok {
			if !create {
				return nil, nil
			}
			var err error
			if ep, err = ix.register(name); err != nil {
				return nil, err
			}
		}
		ep.mu.Lock()
		if !ep.dead {
			return ep, nil
		}
		ep.mu.Unlock() // cleared meanwhile: look the name up again
	}
}

// register interns an endpoint name, assigning it a small integer ID.
func (ix *Index) register(name string) (*endpoint, error) {
	ix.regMu.Lock()
	defer ix.regMu.Unlock()
	if ep, ok := ix.eps.Load(name); ok {
		return ep, nil
	}
	var id uint32
	switch {
	case len(ix.freeIDs) > idReuseDelay || (ix.nextID >= maxEndpointID && len(ix.freeIDs) > 0):
		id = ix.freeIDs[0]
		ix.freeIDs = ix.freeIDs[1:]
	case ix.nextID < maxEndpointID:
		ix.nextID++
		id = ix.nextID
	default:
		return nil, ErrTooManyEndpoints
	}
	ep := &endpoint{name: strings.Clone(name), id: id, eng: newEngTable(rand.Uint64(), ix.pool)}
	if id > ix.maxID.Load() {
		ix.maxID.Store(id)
	}
	ix.eps.Store(ep.name, ep)
	ix.byID.Store(id, ep)
	ix.nEndpoints.Add(1)
	ix.gen.Add(1)
	return ep, nil
}

// unregister removes a cleared endpoint from the registry; ep.mu is held.
func (ix *Index) unregister(ep *endpoint) {
	ep.dead = true
	ix.regMu.Lock()
	defer ix.regMu.Unlock()
	ix.eps.Compute(ep.name, func(cur *endpoint, loaded bool) (*endpoint, bool) {
		return cur, loaded && cur == ep
	})
	ix.byID.Compute(ep.id, func(cur *endpoint, loaded bool) (*endpoint, bool) {
		return cur, !loaded || cur == ep
	})
	ix.freeIDs = append(ix.freeIDs, ep.id)
	ix.nEndpoints.Add(-1)
	ix.gen.Add(1)
}

// tierID returns the ID of an engine medium (case-insensitive; "" is
// "gpu"), registering it when create is set. A medium gets a tier of its
// own when it is one kvroute knows (gpu, cpu, cpu_pinned, storage, disk)
// or one Config.TierWeights names; any other name the engines send shares
// the one tier "other", so made-up names cannot take the slots a real tier
// arriving later needs. The index tells at most maxTiers tiers apart:
// further configured names share the last ID, for stores and removals
// alike.
func (ix *Index) tierID(medium string, create bool) (uint8, bool) {
	t := ix.tiers.Load()
	if id, ok := t.lookup(medium); ok {
		return id, ok
	}
	name := normTier(medium)
	if _, configured := t.cfg[name]; !configured && tierClass(name) == classOther {
		name = otherTier
	}
	if id, ok := t.lookup(name); ok {
		return id, true
	}
	if !create {
		if len(t.names) == maxTiers {
			return maxTiers - 1, true // where a store of this name went
		}
		return 0, false
	}
	ix.tierMu.Lock()
	defer ix.tierMu.Unlock()
	t = ix.tiers.Load()
	if id, ok := t.lookup(name); ok {
		return id, true
	}
	if len(t.names) == maxTiers {
		return maxTiers - 1, true
	}
	t = t.clone()
	id := t.add(name)
	ix.tiers.Store(t)
	return id, true
}

// sweeper removes expired speculative entries every interval of the
// index's clock until Close.
func (ix *Index) sweeper(interval time.Duration) {
	defer close(ix.done)
	t := ix.clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ix.stop:
			return
		case <-t.C():
			ix.Sweep()
		}
	}
}
