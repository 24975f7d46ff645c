package cluster

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// Values far over what kvroute writes, written into the real redis-server
// as anyone with access to it could, are refused before the replica's Redis
// client reads them into memory; the rest of the shared state goes on.

const refusedMetric = "kvroute_cluster_redis_replies_refused_total"

// allocated returns the bytes the process has allocated so far.
func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// rawPublish publishes payload on channel through a plain connection
// writing RESP itself, so that the test's own client allocates nothing of
// the payload.
func rawPublish(t *testing.T, addr, channel string, payload []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "*3\r\n$7\r\nPUBLISH\r\n$%d\r\n%s\r\n$%d\r\n", len(channel), channel, len(payload))
	require.NoError(t, err)
	_, err = conn.Write(payload)
	require.NoError(t, err)
	_, err = conn.Write([]byte("\r\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, ":1\r\n", line, "one subscriber got it")
}

// A peer publishing a 6 MiB message on the decision channel: the
// subscriber refuses it as its bytes arrive (counted, and counted as an
// invalid message), allocates nothing of its size, keeps its subscription,
// and applies another peer's decision published next.
func TestOversizedDecisionMessageIsRefusedUnread(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	x := newHostileTarget(t, srv.Addr)
	refused := x.r.met.refused[refuseString]
	const size = 6 << 20
	payload := appendDecisionHeader(nil, "ghost", 1)
	payload = append(payload, make([]byte, size-len(payload))...)
	before := allocated()
	rawPublish(t, srv.Addr, x.r.keys.channel, payload)
	require.Eventually(t, func() bool { return testutil.ToFloat64(refused) == 1 }, deltaWait, time.Millisecond)
	require.Less(t, allocated()-before, uint64(size/2), "the message was not read into memory")

	msg := appendDecision(appendDecisionHeader(nil, "b", 1), known, []kvindex.Key{1, 2, 3})
	require.NoError(t, newNamedGhost(t, srv.Addr, "b").rdb.Publish(context.Background(), x.r.keys.channel, msg).Err())
	require.Eventually(t, func() bool { return x.r.Stats().Applied == 1 }, deltaWait, time.Millisecond)
	require.Equal(t, 3, x.ix.Stats().Speculative, "the next peer's decision is applied")
	require.EqualValues(t, 1, counter(t, x.reg, "kvroute_cluster_invalid_messages_total", nil))
	require.Zero(t, counter(t, x.reg, "kvroute_cluster_redis_errors_total", map[string]string{"op": "subscribe"}),
		"the subscription was kept")
	x.r.Close()
}

// A 3 MiB value in a peer's record key is refused by the read that takes
// it, without allocating it, and counted as an invalid record: the other
// peer's record of the same MGET is read and the replica stays healthy.
func TestOversizedRecordIsRefusedUnread(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	ghost, b := newGhost(t, srv.Addr), newNamedGhost(t, srv.Addr, "b")
	x := newHostileTarget(t, srv.Addr)
	ctx := context.Background()
	const size = 3 << 20
	require.NoError(t, ghost.rdb.Set(ctx, ghost.keys.selfKey, make([]byte, size), time.Hour).Err())
	require.NoError(t, ghost.rdb.SAdd(ctx, ghost.keys.members, "ghost").Err())
	b.record(1, time.Hour, EndpointLoad{Endpoint: known, Tokens: 40, Requests: 1})
	before := allocated()
	x.r.read()
	require.Less(t, allocated()-before, uint64(size/2), "the record was not read into memory")
	require.False(t, x.r.Degraded())
	require.Equal(t, []Peer{{ID: "b"}}, x.r.Peers())
	require.Equal(t, [2]int64{40, 1}, peerLoad(x.tr, known))
	require.EqualValues(t, 1, counter(t, x.reg, refusedMetric, map[string]string{"reason": "string_too_long"}))
	require.EqualValues(t, 1, counter(t, x.reg, "kvroute_cluster_invalid_records_total", nil))

	peers, skipped, err := LivePeers(ctx, Config{Addrs: []string{srv.Addr}, Pool: "d", ReplicaID: "a"})
	require.NoError(t, err)
	require.Empty(t, peers, "b advertises no snapshot URL")
	require.Equal(t, 1, skipped.Unreadable, "LivePeers refuses the record too")
	x.r.Close()
}

// A member set that SSCAN returns whole (an intset, raised by the server's
// configuration to 100,000 entries) is more elements than a replica reads
// in one reply: the read fails before go-redis allocates the array (counted,
// the replica is degraded), and succeeds again once the set is sane.
func TestOversizedMemberSetReplyIsRefused(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	g := newGhost(t, srv.Addr)
	x := newHostileTarget(t, srv.Addr)
	ctx := context.Background()
	require.NoError(t, g.rdb.ConfigSet(ctx, "set-max-intset-entries", "200000").Err())
	require.NoError(t, g.rdb.Del(ctx, g.keys.members).Err()) // without the replica's own ID, which is no integer
	const junk = 100_000
	for b := 0; b < junk; b += 10_000 {
		ids := make([]any, 10_000)
		for i := range ids {
			ids[i] = strconv.Itoa(b + i)
		}
		require.NoError(t, g.rdb.SAdd(ctx, g.keys.members, ids...).Err())
	}
	require.Equal(t, "intset", g.rdb.ObjectEncoding(ctx, g.keys.members).Val())
	x.r.read()
	require.True(t, x.r.Degraded())
	require.EqualValues(t, 1, counter(t, x.reg, refusedMetric, map[string]string{"reason": "too_many_elements"}))

	require.NoError(t, g.rdb.Del(ctx, g.keys.members).Err())
	g.record(1, time.Hour)
	x.r.read()
	require.False(t, x.r.Degraded(), "a new connection reads the sane set")
	require.Equal(t, []Peer{{ID: "ghost"}}, x.r.Peers())
	x.r.Close()
}

// wrappedClient is a UniversalClient of a type kvroute does not know.
type wrappedClient struct{ redis.UniversalClient }

// A user-supplied go-redis client is not bounded itself (the user's own
// large values still read whole, and the replica does not close it): the
// replica reads through a client of its own built from its options, which
// is. A client of another type is used as is, with a warning.
func TestUserClientIsCopiedBounded(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	ctx := context.Background()
	user := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer user.Close()
	ghost := newGhost(t, srv.Addr)
	const size = 3 << 20
	require.NoError(t, ghost.rdb.Set(ctx, ghost.keys.selfKey, make([]byte, size), time.Hour).Err())
	require.NoError(t, ghost.rdb.SAdd(ctx, ghost.keys.members, "ghost").Err())

	build := func(client redis.UniversalClient, logs *records) (*Replica, *prometheus.Registry) {
		reg := prometheus.NewRegistry()
		ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
		require.NoError(t, err)
		t.Cleanup(ix.Close)
		tr, err := tokenload.NewTracker(tokenload.Options{})
		require.NoError(t, err)
		cfg := Config{Pool: "d", ReplicaID: "a", Lease: 3 * time.Hour, RefreshPeriod: time.Hour, ReadPeriod: time.Hour, OpTimeout: 2 * time.Second}
		r, err := New(cfg, ix, tr, Options{Set: telemetry.Set{Registerer: reg, Logger: slog.New(logs)}, Client: client})
		require.NoError(t, err)
		return r, reg
	}
	logs := &records{}
	r, reg := build(user, logs)
	require.EqualValues(t, 1, counter(t, reg, refusedMetric, map[string]string{"reason": "string_too_long"}),
		"New's read goes through the replica's bounded copy")
	require.Empty(t, warned(logs))
	r.Close()
	v, err := user.Get(ctx, ghost.keys.selfKey).Result()
	require.NoError(t, err, "the user's client is open and unbounded")
	require.Len(t, v, size)

	logs = &records{}
	r, reg = build(wrappedClient{user}, logs)
	require.Zero(t, counter(t, reg, refusedMetric, map[string]string{"reason": "string_too_long"}))
	require.Len(t, warned(logs), 1, "an unknown client type is used as is, with a warning")
	r.Close()
	require.NoError(t, user.Ping(ctx).Err())
}

// warned returns the warnings that a client's replies are not bounded.
func warned(logs *records) []string {
	var out []string
	for _, l := range logs.all() {
		if strings.Contains(l, "not bounded") {
			out = append(out, l)
		}
	}
	return out
}
