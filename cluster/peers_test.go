package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
)

// LivePeers says which members of the pool it passed over and why, as the
// steady-state reader classifies them: a replica whose bootstrap found no
// peer to load from can tell an empty pool from one whose records are
// unreadable, stale (clocks that disagree) or advertise nothing to fetch.
func TestLivePeersCountsTheMembersPassedOver(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	cfg := Config{Addrs: []string{srv.Addr}, Pool: "d", ReplicaID: "self"}
	lease := cfg.WithDefaults().Lease
	k := newKeys("d", "self")
	put := func(id string, rec []byte) {
		require.NoError(t, rdb.Set(ctx, k.replica(id), rec, time.Hour).Err())
		require.NoError(t, rdb.SAdd(ctx, k.members, id).Err())
	}
	record := func(url string, sent time.Time) []byte {
		return encodeRecord(nil, url, uint64(sent.UnixMilli()), 1, nil, nil)
	}

	peers, skipped, err := LivePeers(ctx, cfg)
	require.NoError(t, err)
	require.Empty(t, peers)
	require.Equal(t, Skipped{}, skipped, "an empty pool passes nothing over")

	now := time.Now()
	put("good", record("http://good.example:9090/snapshot", now))
	put("garbage", []byte("not a record"))
	put("old", record("http://old.example:9090/snapshot", now.Add(-2*lease)))
	put("ahead", record("http://ahead.example:9090/snapshot", now.Add(2*lease)))
	put("nourl", record("", now))
	put("badurl", record("ftp://bad.example/snapshot", now))
	put("self", record("http://self.example:9090/snapshot", now))
	require.NoError(t, rdb.SAdd(ctx, k.members, "gone", "bad id\n").Err()) // no record; no valid ID

	peers, skipped, err = LivePeers(ctx, cfg)
	require.NoError(t, err)
	require.Equal(t, []Peer{{ID: "good", SnapshotURL: "http://good.example:9090/snapshot"}}, peers)
	require.Equal(t, Skipped{Unreadable: 2, Stale: 2, NoSnapshot: 2, Expired: 1}, skipped)
	require.Equal(t, "2 unreadable, 2 stale, 2 without a snapshot URL, 1 expired, 0 beyond maxPeers", skipped.String())

	// With room for three others, the members after the first three valid
	// IDs in ID order ("ahead", "badurl", "garbage") are not read, and
	// counted. (Every member is listed: the list is read up to
	// membersRead × MaxPeers IDs.)
	cfg.MaxPeers = 3
	peers, skipped, err = LivePeers(ctx, cfg)
	require.NoError(t, err)
	require.Empty(t, peers)
	require.Equal(t, Skipped{Unreadable: 2, Stale: 1, NoSnapshot: 1, BeyondMax: 4}, skipped)
}
