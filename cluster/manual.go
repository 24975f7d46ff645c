package cluster

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kvroute/kvroute/internal/clusterseam"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/tokenload"
)

// A manual replica is the same Replica with its Redis replaced by another
// clusterseam.Store and its four goroutines replaced by calls: the routing
// simulation (bench/internal/sim) drives refresh, read, the publisher's
// flush and the subscriber's apply on its virtual clock, so that a run is
// deterministic. Only that simulation builds one; it is reachable only
// through the internal clusterseam package.
func init() {
	clusterseam.NewManual = func(cfg any, index *kvindex.Index, tracker *tokenload.Tracker, store clusterseam.Store, now func() time.Time, specTTL time.Duration) (any, clusterseam.Manual, error) {
		c, ok := cfg.(Config)
		if !ok {
			return nil, nil, fmt.Errorf("%w: NewManual takes a cluster.Config, not %T", ErrInvalidConfig, cfg)
		}
		r, err := newManual(c, index, tracker, store, now, specTTL)
		if err != nil {
			return nil, nil, err
		}
		return r, &manual{r: r, selfHeader: string(appendStr([]byte{decisionMagic, wireVersion}, r.cfg.ReplicaID))}, nil
	}
}

// newManual builds a replica over store that starts nothing; Addrs may be
// empty.
func newManual(cfg Config, index *kvindex.Index, tracker *tokenload.Tracker, store clusterseam.Store, now func() time.Time, specTTL time.Duration) (*Replica, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if index == nil || tracker == nil || store == nil || now == nil {
		return nil, errors.New("cluster: a manual replica needs an index, a load tracker, a store and a clock")
	}
	r, err := newReplica(cfg, index, tracker, Options{SpeculativeTTL: specTTL})
	if err != nil {
		return nil, err
	}
	r.store, r.now, r.manual = store, now, true
	r.dq.seq = uint64(now().UnixMicro())
	if !cfg.DisableSharedDecisions {
		tracker.SetObserver(r.observe)
	}
	return r, nil
}

// manual is the clusterseam.Manual face of a manual replica.
type manual struct {
	r          *Replica
	buf        []byte
	scratch    []kvindex.Key
	selfHeader string
}

func (m *manual) Refresh() { m.r.refresh() }
func (m *manual) Read()    { m.r.read() }

func (m *manual) Queued() int {
	m.r.q.mu.Lock()
	defer m.r.q.mu.Unlock()
	return m.r.q.n + m.r.dq.n
}

func (m *manual) Flush() int {
	var n int
	m.buf, n = m.r.flush(m.buf)
	return n
}

func (m *manual) Apply(msg []byte) {
	if strings.HasPrefix(string(msg), m.selfHeader) {
		return // our own message, as receiveLoop skips it
	}
	m.scratch = m.r.apply(msg, m.scratch)
}

func (m *manual) Channel() string { return m.r.keys.channel }
