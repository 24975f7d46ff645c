package sim

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/kvroute/kvroute/cluster"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// SharedState makes a run's kvroute gateway replicas one active-active pool
// that shares in-flight load and routing decisions through the real cluster
// package. Only here, in the deterministic virtual-clock run, is its Redis
// replaced: by virtualRedis, an in-process store on the virtual clock that
// implements only the operations package cluster performs (a leased record
// per replica, the member set, a multi-key read, publish), and the
// replicas' background goroutines by steps this run schedules at their
// periods. Everything else, the records and decision messages on the wire,
// the peer-load sums, the speculative entries, is the cluster package's own
// code. Propagation is modelled in virtual time:
//
//   - load: a replica's refresh reaches the store RedisRTT/2 after its
//     tick; a peer's read (SMEMBERS, then MGET: two round trips) sees the
//     store as it was RedisRTT/2 before the read's result lands, so a load
//     change shows in a peer's Pick after at most RefreshPeriod + ReadPeriod
//   - RedisRTT (plus the SMEMBERS round trip for a newly joined member);
//     a record expires Lease after it reached the store;
//   - decisions: queued by Pick, published at most PublishInterval after the
//     previous message (as the cluster's publisher batches them) and applied
//     by every other replica RedisRTT after publishing (one hop to Redis,
//     one to the subscriber);
//   - load changes (a dispatch, a first chunk, the end of a request) travel
//     in the same messages as the decisions, but a queued change is sent at
//     once, without waiting out PublishInterval (the cluster's own rule,
//     Manual.FlushAt), so a peer's Pick sees it within LoadChangeDelay (one
//     RedisRTT); the records above remain what supersedes them (and what a
//     lost change falls back to);
//   - membership: each replica registers (its first record) and reads its
//     peers once when it joins, before it routes, as cluster.New does; its
//     periodic ticks then start at spread phases.
//
// Zero fields take the cluster package's defaults (RedisRTT: 1 ms).
type SharedState struct {
	RefreshPeriod   time.Duration `json:"refreshPeriod"`
	ReadPeriod      time.Duration `json:"readPeriod"`
	Lease           time.Duration `json:"lease"`
	PublishInterval time.Duration `json:"publishInterval"`
	// RedisRTT is one round trip between a replica and Redis.
	RedisRTT time.Duration `json:"redisRTT"`
	// Exact switches parts of the propagation off, for the decomposition
	// of what R replicas lose against one router (sharedexact.go).
	Exact SharedExact `json:"exact,omitzero"`
	// LeaderRTT, when positive, is an experiment and not what package
	// cluster does: replica 0 picks for every replica (leader.go). A
	// request reaching another replica is forwarded to the leader and
	// picked one LeaderRTT later, and its first chunk and end reach the
	// leader's load accounting LeaderRTT/2 after they happen.
	LeaderRTT time.Duration `json:"leaderRTT,omitempty"`
	// LeaderChangesInstant, with LeaderRTT, applies the forwarded requests'
	// load changes on the leader at once: one router whose requests from
	// the other replicas arrive LeaderRTT late, nothing else changed (a
	// control of how far a shift of arrival times alone moves the p90).
	LeaderChangesInstant bool `json:"leaderChangesInstant,omitempty"`
}

// DefaultRedisRTT is the replica-to-Redis round trip of SharedState.
const DefaultRedisRTT = time.Millisecond

// withDefaults fills the zero fields.
func (s SharedState) withDefaults() SharedState {
	c := cluster.Config{RefreshPeriod: s.RefreshPeriod, ReadPeriod: s.ReadPeriod, Lease: s.Lease,
		PublishInterval: s.PublishInterval}.WithDefaults()
	s.RefreshPeriod, s.ReadPeriod, s.Lease, s.PublishInterval = c.RefreshPeriod, c.ReadPeriod, c.Lease, c.PublishInterval
	if s.RedisRTT == 0 {
		s.RedisRTT = DefaultRedisRTT
	}
	return s
}

// LoadStaleness is the longest a replica's load takes to reach its peers'
// Picks through the records alone (RefreshPeriod + ReadPeriod + RedisRTT):
// the bound when a load change message is lost. Delivered changes arrive
// within DecisionDelay.
func (s SharedState) LoadStaleness() time.Duration {
	s = s.withDefaults()
	return s.RefreshPeriod + s.ReadPeriod + s.RedisRTT
}

// DecisionDelay is the longest a decision takes to become a speculative
// entry on the other replicas: PublishInterval + RedisRTT.
func (s SharedState) DecisionDelay() time.Duration {
	s = s.withDefaults()
	return max(s.PublishInterval, 0) + s.RedisRTT
}

// LoadChangeDelay is the longest a load change (a dispatch, a first chunk,
// the end of a request) takes to reach the other replicas' load: the
// cluster's publisher sends a load change at once, so one RedisRTT.
func (s SharedState) LoadChangeDelay() time.Duration {
	return s.withDefaults().RedisRTT
}

func (s SharedState) validate() error {
	s = s.withDefaults()
	if s.RefreshPeriod <= 0 || s.ReadPeriod <= 0 || s.RedisRTT < 0 || s.Lease < 2*s.RefreshPeriod {
		return fmt.Errorf("%w: sharedState needs positive periods, redisRTT >= 0 and lease >= 2 × refreshPeriod: %+v", ErrInvalidConfig, s)
	}
	return nil
}

// sharedPool drives a run's replicas of the pool on the virtual clock.
type sharedPool struct {
	cfg     SharedState
	store   *virtualRedis
	clock   telemetry.Clock
	reps    []*cluster.Manual
	refresh []time.Time // next refresh tick per replica
	read    []time.Time // next read tick per replica
	flush   []time.Time // pending flush per replica; zero: none
	flushed []time.Time // last flush per replica
}

// newSharedPool prepares the pool the run's kvroute replicas join when
// Config.SharedState is set (nil otherwise); each replica joins it as its
// Router is built (join), and startShared then starts them.
func (r *run) newSharedPool() (*sharedPool, error) {
	if r.cfg.SharedState == nil || !r.policy.isKVRoute() {
		return nil, nil
	}
	s := r.cfg.SharedState.withDefaults()
	if err := s.validate(); err != nil {
		return nil, err
	}
	now := func() time.Time { return r.now }
	return &sharedPool{cfg: s, store: newVirtualRedis(now, s.RedisRTT), clock: virtualClock{now: now}}, nil
}

// join returns what builds gateway replica g's cluster replica
// (kvroute.Options.NewClusterReplica): a manual replica of the pool over
// the virtual-time store, on the virtual clock.
func (p *sharedPool) join(g int) func(*kvindex.Index, *tokenload.Tracker) (*cluster.Replica, error) {
	return func(index *kvindex.Index, load *tokenload.Tracker) (*cluster.Replica, error) {
		s := p.cfg
		cc := cluster.Config{Pool: "sim", ReplicaID: fmt.Sprintf("gw-%d", g), Lease: s.Lease,
			RefreshPeriod: s.RefreshPeriod, ReadPeriod: s.ReadPeriod, PublishInterval: s.PublishInterval,
			OpTimeout: time.Second}
		m, err := cluster.NewManual(cc, index, load, p.store, cluster.Options{Set: telemetry.Set{Clock: p.clock}})
		if err != nil {
			return nil, err
		}
		for len(p.reps) <= g {
			p.reps = append(p.reps, nil)
		}
		p.reps[g] = m
		return m.Replica(), nil
	}
}

// startShared starts the run's replicas of the pool once every Router is
// built.
func (r *run) startShared() error {
	p := r.shared
	if p == nil {
		return nil
	}
	s := p.cfg
	n := len(r.rts)
	if len(p.reps) != n {
		return fmt.Errorf("sim: %d of %d replicas joined the shared state", len(p.reps), n)
	}
	for g, m := range p.reps {
		// As cluster.New does before the Router routes: register (the
		// first record) and read the peers once.
		m.Refresh()
		m.Read()
		// Replicas start at spread phases, as independent processes would.
		p.refresh = append(p.refresh, r.now.Add(time.Duration(g)*s.RefreshPeriod/time.Duration(n)))
		p.read = append(p.read, r.now.Add(time.Duration(g)*s.ReadPeriod/time.Duration(n)+s.ReadPeriod/(2*time.Duration(n))))
		p.flush = append(p.flush, time.Time{})
		p.flushed = append(p.flushed, time.Time{})
	}
	return nil
}

// virtualClock is the run's virtual time as a telemetry.Clock; what runs on
// it reads only Now (a manual replica and a Router without events or a
// sweeper set no timers), so its timers are the wall clock's.
type virtualClock struct {
	now func() time.Time
}

func (c virtualClock) Now() time.Time { return c.now() }

func (virtualClock) NewTimer(d time.Duration) telemetry.Timer { return telemetry.Wall.NewTimer(d) }

func (virtualClock) NewTicker(d time.Duration) telemetry.Ticker { return telemetry.Wall.NewTicker(d) }

func (virtualClock) AfterFunc(d time.Duration, f func()) telemetry.Timer {
	return telemetry.Wall.AfterFunc(d, f)
}

// queued notes that replica g may have queued a decision or a load change
// (a Pick, a first chunk, the end of a request): its publisher wakes, as
// the cluster's publisher wakes on either, and sends when the cluster's own
// rule says (Manual.FlushAt: a load change at once, decisions alone once
// PublishInterval has passed since the previous message); a load change
// queued while decisions wait brings the flush forward.
func (p *sharedPool) queued(g int, now time.Time) {
	at, ok := p.reps[g].FlushAt(p.flushed[g])
	if !ok {
		return
	}
	if at.Before(now) {
		at = now
	}
	if p.flush[g].IsZero() || at.Before(p.flush[g]) {
		p.flush[g] = at
	}
}

// next is the earliest pending step; the refresh and read ticks never end,
// so it only reports them while other work remains (busy).
func (p *sharedPool) next(busy bool) (time.Time, bool) {
	var t time.Time
	found := false
	consider := func(c time.Time) {
		if !c.IsZero() && (!found || c.Before(t)) {
			t, found = c, true
		}
	}
	if d, ok := p.store.nextDelivery(); ok {
		consider(d)
	}
	for g := range p.reps {
		consider(p.flush[g])
		if busy {
			consider(p.refresh[g])
			consider(p.read[g])
		}
	}
	return t, found
}

// advance runs every step due at or before now: deliveries, then per
// replica its flush, refresh and read.
func (p *sharedPool) advance(now time.Time) {
	for _, msg := range p.store.deliver(now) {
		for _, m := range p.reps {
			m.Apply(msg)
		}
	}
	for g, m := range p.reps {
		if f := p.flush[g]; !f.IsZero() && !f.After(now) {
			p.flush[g], p.flushed[g] = time.Time{}, now
			m.Flush()
		}
		for !p.refresh[g].After(now) {
			m.Refresh()
			p.refresh[g] = p.refresh[g].Add(p.cfg.RefreshPeriod)
		}
		for !p.read[g].After(now) {
			m.Read()
			p.read[g] = p.read[g].Add(p.cfg.ReadPeriod)
		}
	}
}

// virtualRedis is the in-process stand-in for Redis of the virtual-clock
// run: key → versioned value with a TTL, set → versioned members, and a
// channel whose messages reach the subscribers one round trip after they
// are published. A write reaches it half a round trip after the call; a
// read returns what it held half a round trip before the call returns
// (the reply's trip back), a two-round-trip read (SMEMBERS before MGET)
// one round trip earlier still. It is deterministic: no goroutine, no wall
// clock, sorted member lists.
type virtualRedis struct {
	now      func() time.Time
	rtt      time.Duration
	keys     map[string][]version
	members  map[string]map[string][]version
	queue    timeQueue[[]byte] // published messages in flight to the subscribers
	commands int
}

// version is one write of a key or a set member.
type version struct {
	at      time.Time // when the write reached the store
	data    []byte
	present bool
	expires time.Time // zero: no TTL
}

var _ cluster.Store = (*virtualRedis)(nil)

func newVirtualRedis(now func() time.Time, rtt time.Duration) *virtualRedis {
	return &virtualRedis{now: now, rtt: rtt, keys: map[string][]version{}, members: map[string]map[string][]version{}}
}

// write appends v to vs, dropping versions no read can see any more.
func (s *virtualRedis) write(vs []version, v version) []version {
	horizon := s.now().Add(-2 * s.rtt)
	keep := 0
	for i := range vs {
		if vs[i].at.After(horizon) {
			break
		}
		keep = i // the latest version at or before the horizon
	}
	vs = append(vs[:0], vs[keep:]...)
	return append(vs, v)
}

// at returns the value vs held at t.
func at(vs []version, t time.Time) (version, bool) {
	for i := len(vs) - 1; i >= 0; i-- {
		if !vs[i].at.After(t) {
			v := vs[i]
			return v, v.present && (v.expires.IsZero() || t.Before(v.expires))
		}
	}
	return version{}, false
}

func (s *virtualRedis) arrive() time.Time { return s.now().Add(s.rtt / 2) }

func (s *virtualRedis) setMember(set, id string, present bool) {
	m := s.members[set]
	if m == nil {
		m = map[string][]version{}
		s.members[set] = m
	}
	m[id] = s.write(m[id], version{at: s.arrive(), present: present})
}

// Refresh writes the record and the membership. The member set's own TTL
// (PEXPIRE, counted) is not modelled: it only matters once no replica of
// the pool refreshes, which no run reaches.
func (s *virtualRedis) Refresh(_ context.Context, key string, record []byte, lease time.Duration, members, id string) error {
	s.commands += 3
	t := s.arrive()
	s.keys[key] = s.write(s.keys[key], version{at: t, data: append([]byte(nil), record...), present: true, expires: t.Add(lease)})
	s.setMember(members, id, true)
	return nil
}

func (s *virtualRedis) Members(_ context.Context, set string) ([]string, error) {
	s.commands++
	t := s.now().Add(-s.rtt/2 - s.rtt) // SMEMBERS ran a round trip before the MGET whose reply lands now
	var ids []string
	for id, vs := range s.members[set] {
		if _, ok := at(vs, t); ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

func (s *virtualRedis) Get(_ context.Context, keys []string) ([]cluster.Value, error) {
	s.commands++
	t := s.now().Add(-s.rtt / 2)
	out := make([]cluster.Value, len(keys))
	for i, k := range keys {
		if v, ok := at(s.keys[k], t); ok {
			out[i] = cluster.Value{Data: v.data, OK: true}
		}
	}
	return out, nil
}

func (s *virtualRedis) Forget(_ context.Context, set string, ids []string) error {
	s.commands++
	for _, id := range ids {
		s.setMember(set, id, false)
	}
	return nil
}

func (s *virtualRedis) Leave(_ context.Context, key, set, id string) error {
	s.commands += 2
	s.keys[key] = s.write(s.keys[key], version{at: s.arrive()})
	s.setMember(set, id, false)
	return nil
}

func (s *virtualRedis) Publish(_ context.Context, _ string, msg []byte) error {
	s.commands++
	s.queue.push(s.now().Add(s.rtt), append([]byte(nil), msg...))
	return nil
}

// nextDelivery is when the next published message reaches the subscribers.
func (s *virtualRedis) nextDelivery() (time.Time, bool) {
	return s.queue.next()
}

// deliver returns the messages due by now, in publish order.
func (s *virtualRedis) deliver(now time.Time) [][]byte {
	var out [][]byte
	for m, ok := s.queue.popDue(now); ok; m, ok = s.queue.popDue(now) {
		out = append(out, m)
	}
	return out
}

// deliverAll returns every message in flight, in publish order (the
// tests' ideal sharing).
func (s *virtualRedis) deliverAll() [][]byte {
	var out [][]byte
	for s.queue.Len() > 0 {
		_, m := s.queue.pop()
		out = append(out, m)
	}
	return out
}
