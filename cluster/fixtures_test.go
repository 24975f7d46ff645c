package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// deltaWait bounds the waits for what pub/sub carries, and only ends a
// test that would otherwise hang.
const deltaWait = 10 * time.Second // generous: a loaded 2-core machine

// quietReplica joins the pool "d" at addr with refresh and read periods of
// an hour: between its first read (in New) and a read the test forces, only
// the load changes carried over pub/sub can move the peer load it sees.
func quietReplica(t *testing.T, addr, id string, mutate func(*Config)) (*Replica, *tokenload.Tracker) {
	t.Helper()
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	tr, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	cfg := Config{Addrs: []string{addr}, Pool: "d", ReplicaID: id, Lease: 3 * time.Hour,
		RefreshPeriod: time.Hour, ReadPeriod: time.Hour, OpTimeout: 2 * time.Second}
	if mutate != nil {
		mutate(&cfg)
	}
	r, err := New(cfg, ix, tr, Options{})
	require.NoError(t, err)
	t.Cleanup(r.Close)
	acceptTestEndpoints(t, r)
	return r, tr
}

// acceptTestEndpoints gives r the endpoints 10.0.0.1:8000 to 10.0.0.64:8000
// and waits for the read that SetEndpoints asks for, so that no read the
// test did not ask for runs later.
func acceptTestEndpoints(t *testing.T, r *Replica) {
	t.Helper()
	reads := r.Stats().Reads
	r.SetEndpoints(testEndpointIDs())
	require.Eventually(t, func() bool { return r.Stats().Reads > reads }, deltaWait, time.Millisecond)
}

// testEndpointIDs are the endpoints acceptTestEndpoints gives a replica.
func testEndpointIDs() []string {
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = fmt.Sprintf("10.0.0.%d:8000", i+1)
	}
	return ids
}

// peerLoad is the load tr has from the peers on ep: tokens, requests.
func peerLoad(tr *tokenload.Tracker, ep string) [2]int64 {
	p := tr.PeerLoadOf(ep)
	return [2]int64{p.Tokens, p.Requests}
}

// ghost is a replica the test plays by hand on the real Redis: it writes
// its record and publishes its load changes, so the test decides which
// change is lost and which record includes what.
type ghost struct {
	t    *testing.T
	id   string
	rdb  *redis.Client
	keys keys
}

// newGhost is a ghost with replica ID "ghost".
func newGhost(t *testing.T, addr string) *ghost { return newNamedGhost(t, addr, "ghost") }

// newNamedGhost is a ghost with replica ID id.
func newNamedGhost(t *testing.T, addr, id string) *ghost {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return &ghost{t: t, id: id, rdb: rdb, keys: newKeys("d", id)}
}

// record writes the ghost's record (sequence seq, the loads given) with
// lease as its key's TTL, and its membership.
func (g *ghost) record(seq uint64, lease time.Duration, loads ...EndpointLoad) {
	ctx := context.Background()
	require.NoError(g.t, g.rdb.Set(ctx, g.keys.selfKey, encodeRecord(nil, "", uint64(time.Now().UnixMilli()), seq, loads, nil), lease).Err())
	require.NoError(g.t, g.rdb.SAdd(ctx, g.keys.members, g.id).Err())
}

// publish sends the load changes deltas, numbered from first, as one
// message on the pool's channel.
func (g *ghost) publish(first uint64, deltas ...delta) {
	msg := appendDeltas(appendDecisionHeader(nil, g.id, 0), first, deltas)
	require.NoError(g.t, g.rdb.Publish(context.Background(), g.keys.channel, msg).Err())
}

// requirePendingBytesConsistent checks the accounting of the peers' pending
// changes: each view counts its own changes' bytes, the total is the sum of
// the views' counts, and it is never negative.
func requirePendingBytesConsistent(t *testing.T, r *Replica) {
	t.Helper()
	r.viewsMu.Lock()
	defer r.viewsMu.Unlock()
	sum := 0
	for id, v := range r.views {
		held := 0
		for _, d := range v.pending {
			held += deltaBytes(d.endpoint)
		}
		require.Equal(t, held, v.bytes, "peer %s counts the bytes of the changes it holds", id)
		sum += v.bytes
	}
	require.Equal(t, sum, r.pendingBytes, "the total is the sum of the peers' counts")
	require.GreaterOrEqual(t, r.pendingBytes, 0)
}

// hostileTarget is a quiet replica of pool "d" (see quietReplica) whose
// metrics, and its tracker's, are in reg.
type hostileTarget struct {
	r   *Replica
	tr  *tokenload.Tracker
	ix  *kvindex.Index
	reg *prometheus.Registry
}

// newHostileTarget joins the pool at addr as replica "a" with the test
// endpoints accepted.
func newHostileTarget(t *testing.T, addr string) hostileTarget {
	t.Helper()
	return newNamedHostileTarget(t, addr, "a")
}

// newNamedHostileTarget is newHostileTarget with replica ID id.
func newNamedHostileTarget(t *testing.T, addr, id string) hostileTarget {
	t.Helper()
	reg := prometheus.NewRegistry()
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	tr, err := tokenload.NewTracker(tokenload.Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	cfg := Config{Addrs: []string{addr}, Pool: "d", ReplicaID: id, Lease: 3 * time.Hour,
		RefreshPeriod: time.Hour, ReadPeriod: time.Hour, OpTimeout: 2 * time.Second}
	r, err := New(cfg, ix, tr, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	t.Cleanup(r.Close)
	acceptTestEndpoints(t, r)
	return hostileTarget{r: r, tr: tr, ix: ix, reg: reg}
}

// counter returns the value of a counter in reg (0 when it is absent), the
// one whose labels include want.
func counter(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

const known = "10.0.0.1:8000" // one of the target's endpoints

// awaitPeerLoad waits until tr's load from the peers on ep is want
// (tokens, requests); msgAndArgs say what the wait is for.
func awaitPeerLoad(t *testing.T, tr *tokenload.Tracker, ep string, want [2]int64, msgAndArgs ...any) {
	t.Helper()
	require.Eventually(t, func() bool { return peerLoad(tr, ep) == want }, deltaWait, time.Millisecond, msgAndArgs...)
}

// awaitMemoryDrops waits until r has dropped want load changes in all for
// its pending bound (MaxPendingDeltaBytes).
func awaitMemoryDrops(t *testing.T, r *Replica, want float64) {
	t.Helper()
	require.Eventually(t, func() bool { return testutil.ToFloat64(r.met.deltasDropped[deltaDropMemory]) == want },
		deltaWait, time.Millisecond)
}

// startGhostPeer starts a redis-server, the ghost, which writes its record
// (sequence seq, the loads given), and then replica "a" (quietReplica with
// mutate), whose first read has taken the record. Everything stops at the
// test's end.
func startGhostPeer(t *testing.T, seq uint64, mutate func(*Config), loads ...EndpointLoad) (*ghost, *Replica, *tokenload.Tracker) {
	t.Helper()
	srv := redistest.Start(t)
	g := newGhost(t, srv.Addr)
	g.record(seq, time.Hour, loads...)
	a, tr := quietReplica(t, srv.Addr, "a", mutate)
	return g, a, tr
}

// startFloodAndHonest starts a redis-server, the ghosts "flood" and
// "honest" with empty records of sequence 10, and replica "a" holding at
// most maxPending bytes of pending load changes, which knows both peers.
// Everything stops at the test's end.
func startFloodAndHonest(t *testing.T, maxPending int) (flood, honest *ghost, a *Replica, tr *tokenload.Tracker) {
	t.Helper()
	srv := redistest.Start(t)
	flood, honest = newNamedGhost(t, srv.Addr, "flood"), newNamedGhost(t, srv.Addr, "honest")
	flood.record(10, time.Hour)
	honest.record(10, time.Hour)
	a, tr = quietReplica(t, srv.Addr, "a", func(c *Config) { c.MaxPendingDeltaBytes = maxPending })
	require.Len(t, a.Peers(), 2)
	return flood, honest, a, tr
}

// startHostile starts a redis-server, the ghost and a hostile target on
// it; with record the ghost writes an empty record (sequence 1) first, so
// that the target knows it as a peer from its first read. Everything stops
// at the test's end.
func startHostile(t *testing.T, record bool) (*redistest.Server, *ghost, hostileTarget) {
	t.Helper()
	srv := redistest.Start(t)
	g := newGhost(t, srv.Addr)
	if record {
		g.record(1, time.Hour)
	}
	return srv, g, newHostileTarget(t, srv.Addr)
}

// dropped is how many endpoints the target dropped for reason
// (kvroute_cluster_endpoints_dropped_total).
func (x hostileTarget) dropped(t *testing.T, reason string) float64 {
	t.Helper()
	return counter(t, x.reg, "kvroute_cluster_endpoints_dropped_total", map[string]string{"reason": reason})
}
