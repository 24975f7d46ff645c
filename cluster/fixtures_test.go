package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

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
	reg := prometheus.NewRegistry()
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	tr, err := tokenload.NewTracker(tokenload.Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	cfg := Config{Addrs: []string{addr}, Pool: "d", ReplicaID: "a", Lease: 3 * time.Hour,
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
