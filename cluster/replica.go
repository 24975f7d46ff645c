package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// membersRead × MaxPeers is the most member IDs a read takes from the
// member set: room for replicas that left and are not pruned yet, while
// garbage added to the set cannot make a read's memory grow.
const membersRead = 4

// Options are a Replica's injected dependencies; the zero value is valid.
type Options struct {
	// Set is the replica's observability: its metrics, its outage and
	// recovery logs (once per outage), and the clock of its records' and
	// load changes' timestamps and of its periodic work (refresh and read
	// periods, the publish interval, the subscription's retry pacing). The
	// Redis operations' OpTimeout stays wall time: it becomes the socket
	// deadlines of the Redis client.
	telemetry.Set
	// Client, when set, replaces Config.Addrs and its credentials: a
	// *redis.Client (NewFailoverClient's too), *redis.ClusterClient or
	// *redis.Ring lends its options (servers, credentials, TLS, timeouts,
	// pool size) to a client of the Replica's own, whose connections read
	// bounded replies (see the package doc) and which Close closes; hooks
	// added to Client are not carried over. As with the client New builds
	// from Addrs, OpTimeout bounds each of its operations (it honours
	// context deadlines, ContextTimeoutEnabled, whatever Client's setting)
	// and it retries no command (the loops retry at their next period). Client itself is left as it
	// is, so its other users' commands read values of any size, and the
	// Replica does not close it. Any other UniversalClient is used as is,
	// its replies unbounded, and New logs a warning.
	Client redis.UniversalClient
}

// Peer is another live replica of the pool.
type Peer struct {
	// ID is the peer's replica ID.
	ID string
	// SnapshotURL is where the peer serves its index snapshot; empty when it
	// advertises none.
	SnapshotURL string
}

// Replica is one router replica's membership in a pool of active-active
// replicas sharing state through Redis. Its background goroutines refresh
// its lease with its local load, read the peers' loads into the tracker,
// publish its routing decisions and apply the peers'. Nothing it does runs on
// the request path except Publish, which only copies into a bounded queue.
//
// Ownership: New runs one refresh and one read on its caller's goroutine,
// then starts the refresh loop and the read loop and, unless shared
// decisions are off, the publish loop and the receive loop; Close cancels
// ctx (the receive loop's subscription is closed to interrupt it), closes
// q and waits for them on wg. A manual replica (manual.go) starts none:
// its caller runs each step. cfg through met, ctx, cancel and readNow are
// set before the loops start and not written after. healthMu guards
// degraded, written through result by refresh and read, and subDown,
// written by the receive loop; entering degraded also sets cleared and then
// clears views, the peers' queue sums and peers, with healthMu held. peersMu guards peers,
// replaced by the read loop. viewsMu guards views and pendingBytes, written
// by the receive loop (applyDelta), the read loop (mergeRecords), entering
// degraded (clearViews) and SetEndpoints on its caller's goroutine, which
// also replaces accepted under it. q's mutex guards q and dq (see
// decisions.go and deltas.go); stats are atomics.
type Replica struct {
	cfg     Config
	rdb     redis.UniversalClient // nil for a manual replica
	ownRdb  bool
	store   Store // Redis, or the simulation's virtual-time store (manual.go)
	clock   telemetry.Clock
	set     telemetry.Set // whose Registerer Close unregisters met from
	now     func() time.Time
	manual  bool // no goroutines: the simulation drives the steps (manual.go)
	keys    keys
	tracker *tokenload.Tracker
	index   *kvindex.Index
	log     *slog.Logger
	met     *metrics
	stats   stats

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	peersMu sync.RWMutex
	peers   []Peer

	healthMu sync.Mutex
	degraded bool // readDown || writeDown
	// readDown and writeDown say which operation failed during the
	// outage: the outage ends once each that failed has succeeded again,
	// so that a Redis answering reads but refusing writes (a read-only
	// replica, a full Redis) keeps the replica degraded rather than
	// flapping at every read.
	readDown, writeDown bool
	subDown             bool
	// cleared mirrors degraded: set under healthMu before the views are
	// cleared, and read by applyDelta under viewsMu, so that a load change
	// is either cleared with the views or not applied at all.
	cleared atomic.Bool

	q  decisionQueue
	dq deltaQueue // shares q's lock (deltas.go)

	viewsMu      sync.Mutex
	views        map[string]*peerView // peer ID → its load changes above its last record
	pendingBytes int
	accepted     atomic.Pointer[endpointSet] // the endpoints taken from Redis (endpoints.go); replaced under viewsMu
	readNow      chan struct{}               // SetEndpoints asks the read loop for a read at once

	queues queueShare // admission queue depths shared with the peers (queues.go)

	sessions sessionShare // session affinity shared with the peers (sessions.go)

	closeOnce sync.Once
	cleanup   bool // delete the record on Close (tests turn it off)

	testHookRefresh    func() // tests: runs once refresh has taken its record's load and sequence number
	testHookApplyDelta func() // tests: runs as applyDelta is about to take viewsMu
}

// New joins the pool: it registers the replica, reads the live peers once
// (so Peers is populated when New returns and Redis is reachable) and starts
// the background work. index receives the peers' decisions; tracker is the
// router's load tracker, whose local load is published and whose peer load
// is replaced on every read. Redis being unreachable is not an error: the
// replica starts degraded and joins when Redis answers (New then takes up to
// 2 × OpTimeout, its refresh's and its read's: the subscription to the
// peers' decisions, opened before New returns when its read succeeds, is
// then left to the background). Close leaves the pool.
func New(cfg Config, index *kvindex.Index, tracker *tokenload.Tracker, opts Options) (*Replica, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Client == nil && !cfg.Enabled() {
		return nil, fmt.Errorf("%w: no Redis addrs", ErrInvalidConfig)
	}
	if index == nil || tracker == nil {
		return nil, errors.New("cluster: New needs the router's index and load tracker")
	}
	r, err := newReplica(cfg, index, tracker, opts)
	if err != nil {
		return nil, err
	}
	routeRedisLogs(r.log)
	lim := limitsFor(cfg)
	if opts.Client == nil {
		r.rdb, r.ownRdb = newClient(cfg, lim, r.met.refusal), true
	} else if r.rdb, r.ownRdb = clientFrom(opts.Client, lim, r.met.refusal); !r.ownRdb {
		r.log.Warn("cluster: Options.Client is no go-redis client kvroute can copy; the replies it reads are not bounded", "type", fmt.Sprintf("%T", opts.Client))
	}
	r.store = redisStore{rdb: r.rdb, sharded: cfg.ShardedPubSub, maxMembers: membersRead * cfg.MaxPeers}
	if !cfg.DisableSharedDecisions {
		r.watchLoad()
	}
	r.refresh()
	r.read()
	answered := !r.Degraded()
	r.wg.Add(2)
	go r.loop(cfg.RefreshPeriod, r.refresh, nil)
	go r.loop(cfg.ReadPeriod, r.read, r.readNow)
	if !cfg.DisableSharedDecisions {
		// Redis answered the read: subscribe before returning, so that the
		// peers' next messages arrive. Else the receive loop subscribes (nil).
		var ps *redis.PubSub
		if answered {
			ps = r.subscribe()
		}
		r.wg.Add(2)
		go r.publishLoop()
		go r.receiveLoop(ps)
	}
	return r, nil
}

// newReplica builds a Replica's state without a store and without starting
// anything (New does both; newManual gives it the simulation's store).
func newReplica(cfg Config, index *kvindex.Index, tracker *tokenload.Tracker, opts Options) (*Replica, error) {
	met, err := newMetrics(opts.Set)
	if err != nil {
		return nil, err
	}
	r := &Replica{cfg: cfg, keys: newKeys(cfg.Pool, cfg.ReplicaID), tracker: tracker, index: index,
		log: opts.Log().With("replica", cfg.ReplicaID, "pool", cfg.Pool), met: met, set: opts.Set, cleanup: true,
		clock: opts.Clk(), now: opts.Clk().Now}
	r.met.staleness.Set(cfg.StalenessBound().Seconds())
	r.q.init(cfg.DecisionQueue, cfg.MaxKeysPerDecision)
	r.dq.active, r.dq.spare = make([]delta, cfg.DeltaQueue), make([]delta, cfg.DeltaQueue)
	r.dq.totals = make(map[string]localTotal)
	r.dq.seq = uint64(r.now().UnixMicro()) // above any number a previous life of this ID gave
	r.views = make(map[string]*peerView)
	r.readNow = make(chan struct{}, 1)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// ID returns the replica's ID.
func (r *Replica) ID() string { return r.cfg.ReplicaID }

// Config returns the replica's configuration with defaults applied.
func (r *Replica) Config() Config { return r.cfg }

// StalenessBound is Config.StalenessBound: how old the peers' load seen by
// Pick can be while Redis is healthy.
func (r *Replica) StalenessBound() time.Duration { return r.cfg.StalenessBound() }

// Peers returns the other live replicas of the pool as of the last read,
// sorted by ID; empty while degraded. A new replica bootstraps its index
// from one of their snapshot URLs.
func (r *Replica) Peers() []Peer {
	r.peersMu.RLock()
	defer r.peersMu.RUnlock()
	return append([]Peer(nil), r.peers...)
}

// SnapshotURLs returns the non-empty snapshot URLs of Peers, in the same
// order.
func (r *Replica) SnapshotURLs() []string {
	var urls []string
	for _, p := range r.Peers() {
		if p.SnapshotURL != "" {
			urls = append(urls, p.SnapshotURL)
		}
	}
	return urls
}

// Degraded reports whether Redis is unreachable or slow and the replica
// routes on its local state only.
func (r *Replica) Degraded() bool {
	r.healthMu.Lock()
	defer r.healthMu.Unlock()
	return r.degraded
}

// Close leaves the pool: it stops the background work, deletes the
// replica's record (so the peers drop its load at their next read rather
// than at lease expiry), closes the Redis client it built and unregisters
// the metrics New registered, so a replica can be built again on the same
// registry. Calling it again does nothing.
func (r *Replica) Close() {
	if r == nil {
		return
	}
	r.closeOnce.Do(func() {
		if !r.cfg.DisableSharedDecisions {
			r.tracker.SetObserver(nil)
		}
		r.cancel()
		r.q.close()
		r.wg.Wait()
		if r.cleanup {
			ctx, cancel := context.WithTimeout(context.Background(), r.cfg.OpTimeout)
			_ = r.store.Leave(ctx, r.keys.selfKey, r.keys.members, r.cfg.ReplicaID)
			r.countCommands(2)
			cancel()
		}
		if r.ownRdb {
			_ = r.rdb.Close()
		}
		r.set.Unregister(r.met.cs...)
	})
}

// loop runs fn every period of the replica's clock, and whenever wake
// (which may be nil) is signalled, until Close.
func (r *Replica) loop(period time.Duration, fn func(), wake <-chan struct{}) {
	defer r.wg.Done()
	t := r.clock.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C():
			fn()
		case <-wake:
			fn()
		}
	}
}

func (r *Replica) countCommands(n int) {
	r.stats.commands.Add(int64(n))
	r.met.commands.Add(float64(n))
}
