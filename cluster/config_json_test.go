package cluster_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/cluster"
)

// A cluster section decodes strictly on its own, not only inside a Router's
// configuration: a bare number for a duration (once read as nanoseconds) and
// an unknown key are errors naming the key.
func TestConfigDecodesStrictly(t *testing.T) {
	var c cluster.Config
	require.NoError(t, json.Unmarshal([]byte(`{"refreshPeriod":"250ms","addrs":["127.0.0.1:6379"]}`), &c))
	require.Equal(t, 250*time.Millisecond, c.RefreshPeriod)
	require.Equal(t, []string{"127.0.0.1:6379"}, c.Addrs)

	var bare cluster.Config
	require.ErrorContains(t, json.Unmarshal([]byte(`{"refreshPeriod":250}`), &bare),
		`refreshPeriod: bare number 250 is not a duration`)
	require.ErrorContains(t, json.Unmarshal([]byte(`{"refreshPeriods":"250ms"}`), &bare), "refreshPeriods: unknown key")
	require.ErrorContains(t, json.Unmarshal([]byte(`{"RefreshPeriod":"250ms"}`), &bare), `did you mean "refreshPeriod"?`)

	_, err := cluster.LoadConfig(strings.NewReader(`{"lease":3000}`))
	require.ErrorContains(t, err, "lease: bare number 3000")
	_, err = cluster.LoadConfig(strings.NewReader(`{"addrs":["127.0.0.1"]}`)) // LoadConfig validates
	require.ErrorIs(t, err, cluster.ErrInvalidConfig)
	require.ErrorContains(t, err, `addr "127.0.0.1" is not host:port`)

	out, err := json.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(out), `"refreshPeriod":"250ms"`)
}

// A database number is a standalone server's: Redis Cluster has only
// database 0, and go-redis's cluster client ignores DB, so a pool configured
// with several seed addresses (or clusterMode) and a db would share the
// state of every pool of its name in database 0 of the cluster, which the
// operator separated by database. Validate rejects it, naming both keys.
func TestDBWithRedisClusterIsRejected(t *testing.T) {
	for _, c := range []cluster.Config{
		{Addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379"}, DB: 2},
		{Addrs: []string{"10.0.0.1:6379"}, ClusterMode: true, DB: 1},
	} {
		err := c.WithDefaults().Validate()
		require.ErrorIs(t, err, cluster.ErrInvalidConfig, "%+v", c)
		require.ErrorContains(t, err, "db")
	}
	require.NoError(t, cluster.Config{Addrs: []string{"10.0.0.1:6379"}, DB: 2}.WithDefaults().Validate(), "a standalone server's database")
	require.NoError(t, cluster.Config{Addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379"}}.WithDefaults().Validate())
}

// A snapshot URL the peers would refuse is refused here: every peer
// counted the replica's record as invalid at every read and no new replica
// ever bootstrapped from it, while the replica itself started without a
// word.
func TestSnapshotURLPeersWouldRefuseIsRejected(t *testing.T) {
	for _, u := range []string{"10.0.0.5:9091/kvroute/snapshot", "ftp://10.0.0.5/snapshot", "http:///snapshot", "/kvroute/snapshot"} {
		err := cluster.Config{Addrs: []string{"10.0.0.1:6379"}, SnapshotURL: u}.WithDefaults().Validate()
		require.ErrorIs(t, err, cluster.ErrInvalidConfig, "%q", u)
		require.ErrorContains(t, err, "snapshotUrl")
	}
	for _, u := range []string{"", "http://10.0.0.5:9091/kvroute/snapshot", "https://router-0.router:9091/kvroute/snapshot"} {
		require.NoError(t, cluster.Config{Addrs: []string{"10.0.0.1:6379"}, SnapshotURL: u}.WithDefaults().Validate(), "%q", u)
	}
}

// An address go-redis could never dial is refused when the configuration
// is loaded, not found out as an outage that never ends: Validate used to
// take any string with a colon in it ("redis:", "redis:6379x", "::1:6379").
func TestAddrWithoutAPortIsRejected(t *testing.T) {
	for _, a := range []string{"redis:", "redis:6379x", "redis:0", "redis:65536", "::1:6379", "redis:6379:1", "redis: 6379"} {
		err := cluster.Config{Addrs: []string{a}}.WithDefaults().Validate()
		require.ErrorIs(t, err, cluster.ErrInvalidConfig, "%q", a)
		require.ErrorContains(t, err, "host:port", "%q", a)
	}
	for _, a := range []string{"redis:6379", "10.0.0.1:6379", "[::1]:6379", ":6379", "redis.kvroute.svc.cluster.local:16379"} {
		require.NoError(t, cluster.Config{Addrs: []string{a}}.WithDefaults().Validate(), "%q", a)
	}
}

// A queue or peer cap too large to allocate, or whose bounds overflow, is
// refused when the configuration is loaded: New preallocated the queues
// from it (2 × decisionQueue × maxKeysPerDecision keys, 2 × deltaQueue
// changes) and the process died of a failed allocation, and a maxPeers near
// math.MaxInt wrapped the bounds of what a Redis connection reads negative,
// so that every reply was refused and the replica never left degraded mode.
func TestCapsTooLargeToAllocateAreRejected(t *testing.T) {
	base := cluster.Config{Addrs: []string{"10.0.0.1:6379"}}
	for _, c := range []cluster.Config{
		{DecisionQueue: 1 << 40},
		{DecisionQueue: 1 << 21},
		{DecisionQueue: 1 << 18, MaxKeysPerDecision: 1 << 10},
		{DeltaQueue: 1 << 40},
		{MaxPeers: math.MaxInt},
		{MaxPeers: 1 << 20},
	} {
		c.Addrs = base.Addrs
		err := c.WithDefaults().Validate()
		require.ErrorIs(t, err, cluster.ErrInvalidConfig, "%+v", c)
		_, err = cluster.New(c, nil, nil, cluster.Options{}) // refused before anything is built
		require.ErrorIs(t, err, cluster.ErrInvalidConfig, "%+v", c)
	}
	for _, c := range []cluster.Config{
		{DecisionQueue: 1 << 20, MaxKeysPerDecision: 64},
		{DecisionQueue: 1 << 17, MaxKeysPerDecision: 512},
		{DeltaQueue: 1 << 20},
		{MaxPeers: 1 << 16},
	} {
		c.Addrs = base.Addrs
		require.NoError(t, c.WithDefaults().Validate(), "%+v", c)
	}
	_, err := cluster.LoadConfig(strings.NewReader(`{"addrs":["10.0.0.1:6379"],"deltaQueue":100000000000}`))
	require.ErrorContains(t, err, "deltaQueue")
}
