package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/telemetry"
)

// Options are an Affinity's injected dependencies; the zero value is valid.
type Options struct {
	// Set is the Affinity's observability: its metrics' registerer (nil
	// registers none) and the clock of the store's TTL (nil is the wall
	// clock).
	telemetry.Set
}

// Affinity is session affinity for one router: the session store, the
// scorer that reads it (Scorer) and the profile that keys each request and
// records where its session went (Profile). It starts no goroutine; the
// store is bounded (Config.MaxEntries) and safe for concurrent use.
type Affinity struct {
	cfg   Config
	clk   func() time.Time
	base  time.Time // the clock's reading at New: the store's times are durations since it
	set   telemetry.Set
	store *store
	met   *metrics
	memo  *store // Config.Derive: the opening's text hash → its derived key; nil without
	// share is the replica the sessions are shared with (nil: none); the
	// request path reads it without shareMu, which serializes Share and
	// Close and guards closed and stopShare (the replica's detach).
	share     atomic.Pointer[cluster.Replica]
	shareMu   sync.Mutex
	closed    bool
	stopShare func()
	// setCookie: responses to requests without a key set the session cookie.
	setCookie bool
}

// New builds an Affinity from cfg (zero fields take their defaults) and
// registers its metrics with opts.Registerer.
func New(cfg Config, opts Options) (*Affinity, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	clk := opts.Clk().Now
	a := &Affinity{cfg: cfg, clk: clk, base: clk(), set: opts.Set, store: newStore(cfg.MaxEntries, int64(cfg.TTL))}
	a.setCookie = cfg.Cookie != "-" && (cfg.SetCookie == nil || *cfg.SetCookie)
	if cfg.Derive {
		a.memo = newStore(cfg.MaxEntries, int64(cfg.TTL))
	}
	a.met = newMetrics(a.store.len)
	if err := opts.Register(a.met.collectors()...); err != nil {
		return nil, err
	}
	return a, nil
}

// ErrClosed is returned by Share after Close.
var ErrClosed = errors.New("session: affinity closed")

// Close unregisters the metrics New registered; the Affinity must not be
// used afterwards. It stops sharing with the replica given to Share.
func (a *Affinity) Close() {
	a.shareMu.Lock()
	a.closed = true
	a.share.Store(nil)
	if a.stopShare != nil {
		a.stopShare() // leaves an Affinity that took the replica over alone
		a.stopShare = nil
	}
	a.shareMu.Unlock()
	a.set.Unregister(a.met.collectors()...)
}

// Config returns the configuration with defaults applied.
func (a *Affinity) Config() Config { return a.cfg }

// Scorer returns the session-affinity scorer with its configured weight,
// for kvroute.Options.Scorers.
func (a *Affinity) Scorer() kvroute.WeightedScorer {
	return kvroute.WeightedScorer{Scorer: scorer{a}, Weight: a.cfg.Weight}
}

// Profile returns a kvroute.Profile that keys each request (Key, setting
// Request.Session), picks it with next (nil: one role among every
// candidate, the router's default) and records the chosen endpoint as the
// session's (Record). Pass it as kvroute.Options.Profile. A host that runs
// the Selection stages itself calls Key before Match and Record after
// Commit instead.
func (a *Affinity) Profile(next kvroute.Profile) kvroute.Profile {
	return profile{a: a, next: next}
}

// now is the store's time: nanoseconds since New on the clock's monotonic
// reading when it has one (the wall clock's has), so that a step of the
// wall clock (NTP) neither reorders turns nor changes ages.
func (a *Affinity) now() int64 { return int64(a.clk().Sub(a.base)) }

// Hash is the store's key of a session key: its XXH64. Replicas share
// sessions by hash, so a session key never leaves the replica.
func Hash(key string) uint64 { return xxhash.Sum64String(key) }

// Endpoint returns the endpoint that served session key's last turn, if it
// is remembered and not expired. It changes nothing and counts nothing.
func (a *Affinity) Endpoint(key string) (string, bool) {
	if key == "" {
		return "", false
	}
	return a.store.peek(Hash(key), a.now())
}

// Record remembers endpoint as the one that served session key's latest
// turn, and shares it with the replicas given to Share. It is called when
// a decision commits (Profile does it); an empty key does nothing.
func (a *Affinity) Record(key, endpoint string) {
	if key == "" || endpoint == "" {
		return
	}
	h := Hash(key)
	a.put(h, endpoint, a.now(), false)
	a.share.Load().PublishSession(h, endpoint) // nil-safe, never blocks
}

// put records a session's endpoint as of now (a peer's record, as of its
// turn, is ignored when the store holds a later one: put reports false)
// and counts what the store expired and evicted for it.
func (a *Affinity) put(h uint64, endpoint string, now int64, peer bool) bool {
	exp, ev, stored := a.store.record(h, endpoint, now, peer)
	if exp > 0 {
		a.met.expired.Add(float64(exp))
	}
	if ev > 0 {
		a.met.evicted.Add(float64(ev))
	}
	return stored
}

// Share makes the sessions recorded here known to the other replicas of
// r's pool, and theirs known here: each record is queued for r's
// publisher (no Redis call on the request path) and each peer's record
// arrives through r's subscription, is checked (an endpoint not among r's
// endpoints is dropped and counted by the replica) and stored as of its
// age. A nil r (no cluster configured), or a nil Affinity, does nothing.
//
// An Affinity shares with one replica: a call with the replica it already
// shares with does nothing, one with another replica returns an error (Close
// would detach only one, and the other would go on handing its peers'
// records to the closed Affinity), and so does a call after Close
// (ErrClosed), which would otherwise take the replica's sessions from the
// Affinity that replaced this one. An Affinity that shares a replica
// another one shared takes it over: the other's Close then leaves the
// replica's sharing to it.
func (a *Affinity) Share(r *cluster.Replica) error {
	if a == nil || r == nil {
		return nil
	}
	a.shareMu.Lock()
	defer a.shareMu.Unlock()
	if a.closed {
		return fmt.Errorf("%w: sessions not shared", ErrClosed)
	}
	if cur := a.share.Load(); cur != nil {
		if cur == r {
			return nil
		}
		return errors.New("session: Share: the sessions are already shared with another replica")
	}
	a.share.Store(r)
	a.stopShare = r.ShareSessions(a.learn)
	return nil
}

// learn stores a peer's record: the session hash key was routed to
// endpoint age ago. A record older than the TTL (a peer with a longer
// TTL, or one that published late) is expired on arrival: counted as
// expired and not stored, so that it forgets no live session for room.
// One of a turn before the one stored (a delayed message) is superseded.
func (a *Affinity) learn(key uint64, endpoint []byte, age time.Duration) {
	if age > a.cfg.TTL {
		a.met.expired.Inc()
		a.met.peer[peerExpired].Inc()
		return
	}
	now := a.now()
	if a.put(key, a.store.intern(endpoint), now-int64(age), true) {
		a.met.peer[peerLearned].Inc()
	} else {
		a.met.peer[peerSuperseded].Inc()
	}
}

// Len returns the number of sessions stored (expired ones not yet removed
// included).
func (a *Affinity) Len() int { return a.store.len() }

// Outcomes of kvroute_session_lookups_total: what a request with a session
// key found, once its decision committed.
const (
	outHit     = iota // the session's last endpoint was chosen again
	outMoved          // it was remembered, but another endpoint was chosen (load)
	outMiss           // no endpoint remembered: a new session, or one forgotten
	outExpired        // remembered, but longer ago than the TTL
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"hit", "moved", "miss", "expired"}

// profile is Affinity.Profile.
type profile struct {
	a    *Affinity
	next kvroute.Profile
}

// Pick keys the request, picks it and records the session's endpoint. A
// key that names one of the candidates (the session cookie, CookieValue)
// points at it: nothing is stored for it.
func (p profile) Pick(ctx context.Context, req *kvroute.Request, endpoints []kvroute.Endpoint, stages kvroute.Picker) (*kvroute.Decision, error) {
	a := p.a
	key, err := a.keyWith(req, func(r *kvroute.Request) string { return a.deriveKey(ctx, r, endpoints, stages) })
	if err != nil {
		return nil, err
	}
	if key == "" {
		return p.pick(ctx, req, endpoints, stages)
	}
	req.Session = key
	h := Hash(key)
	prev, state := named(key, endpoints), found
	pointer := prev != ""
	if !pointer {
		if prev, state = a.store.lookup(h, a.now()); state == expired {
			a.met.expired.Inc() // the lookup removed it
		}
	}
	d, err := p.pick(ctx, req, endpoints, stages)
	if err != nil {
		return d, err
	}
	ep := d.Endpoint.ID
	switch {
	case state == expired:
		a.met.lookups[outExpired].Inc()
	case state == absent:
		a.met.lookups[outMiss].Inc()
	case prev == ep:
		a.met.lookups[outHit].Inc()
	default:
		a.met.lookups[outMoved].Inc()
	}
	if pointer {
		return d, nil // the response's cookie names ep (ResponseCookie)
	}
	a.put(h, ep, a.now(), false)
	a.share.Load().PublishSession(h, ep)
	return d, nil
}

func (p profile) pick(ctx context.Context, req *kvroute.Request, endpoints []kvroute.Endpoint, stages kvroute.Picker) (*kvroute.Decision, error) {
	if p.next != nil {
		return p.next.Pick(ctx, req, endpoints, stages)
	}
	return stages.Pick(ctx, req, endpoints)
}
