package cluster

import (
	"errors"
	"strings"
	"time"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/tokenload"
)

// Manual is a Replica that runs no goroutine: its Redis is replaced by any
// Store and its four background loops by calls, so that its caller performs
// each step of the background work (refresh, read, the publisher's flush,
// the subscriber's apply) at the time it chooses, on its own clock. The
// routing simulation (bench/internal/sim) drives replicas this way on its
// virtual clock, so that a run is deterministic. A Manual is not safe for
// concurrent use; its Replica is.
type Manual struct {
	r          *Replica
	buf        []byte
	scratch    []kvindex.Key
	selfHeader string
}

// NewManual builds a Manual replica of the pool cfg describes (Addrs may be
// empty) over store, for index and tracker, as New does for a Redis-backed
// one but without reading, writing or starting anything: the caller's first
// Refresh and Read join the pool (New does both before it returns).
// opts.Clock is the replica's clock; opts.Client is ignored.
func NewManual(cfg Config, index *kvindex.Index, tracker *tokenload.Tracker, store Store, opts Options) (*Manual, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if index == nil || tracker == nil || store == nil {
		return nil, errors.New("cluster: a manual replica needs an index, a load tracker and a store")
	}
	opts.Client = nil
	r, err := newReplica(cfg, index, tracker, opts)
	if err != nil {
		return nil, err
	}
	r.store, r.manual = store, true
	if !cfg.DisableSharedDecisions {
		r.watchLoad()
	}
	return &Manual{r: r, selfHeader: string(appendStr([]byte{decisionMagic, wireVersion}, r.cfg.ReplicaID))}, nil
}

// Replica is the replica itself: what a Router uses (Publish, SetEndpoints,
// Close) and what reports its peers and state.
func (m *Manual) Replica() *Replica { return m.r }

// Refresh publishes the replica's local load and renews its lease.
func (m *Manual) Refresh() { m.r.refresh() }

// Read reads the peers' records into the load tracker.
func (m *Manual) Read() { m.r.read() }

// Queued is the number of decisions and load changes waiting to be
// published.
func (m *Manual) Queued() int {
	m.r.q.mu.Lock()
	defer m.r.q.mu.Unlock()
	return m.r.q.n + m.r.dq.n
}

// FlushAt is when the replica's publisher would send what is queued, given
// the time of its previous message (zero: none yet), on the replica's
// clock: at once when a load change is queued, else PublishInterval after
// the previous message; false when nothing is queued. A caller that drives
// the steps calls Flush then, as the simulation does.
func (m *Manual) FlushAt(last time.Time) (time.Time, bool) {
	if m.Queued() == 0 {
		return time.Time{}, false
	}
	return m.r.flushAt(last), true
}

// Flush publishes the queued decisions (as the publishing goroutine does,
// one message per batch) and reports how many it took.
func (m *Manual) Flush() int {
	var n int
	m.buf, n = m.r.flush(m.buf)
	return n
}

// Apply applies a decision message received on the pool's channel; the
// replica's own messages are skipped, as the subscriber skips them.
func (m *Manual) Apply(msg []byte) {
	if strings.HasPrefix(string(msg), m.selfHeader) {
		return
	}
	m.scratch = m.r.apply(msg, m.scratch)
}

// Channel is the pool's decision channel, the one Apply's messages are
// published on.
func (m *Manual) Channel() string { return m.r.keys.channel }
