package cluster_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/cluster"
)

// A replica's defaults and the staleness bound of the peers' load they give.
func ExampleConfig_StalenessBound() {
	cfg := cluster.Config{Addrs: []string{"redis.kvroute.svc:6379"}, ReplicaID: "router-0"}.WithDefaults()
	fmt.Println("lease:", cfg.Lease, "refresh:", cfg.RefreshPeriod, "read:", cfg.ReadPeriod)
	fmt.Println("staleness bound:", cfg.StalenessBound())
	fmt.Println(cfg.Validate())
	// Output:
	// lease: 3s refresh: 250ms read: 250ms
	// staleness bound: 1.5s
	// <nil>
}

// A gateway joins its Router to the pool through Config.Cluster; each replica
// then routes with every replica's load and decisions, and lists its peers
// for index bootstrap. (Not run: it needs a Redis server.)
func Example_router() {
	cfg := kvroute.DefaultConfig()
	cfg.Model = "my-model"
	cfg.Cluster = cluster.Config{
		Addrs:         []string{"redis.kvroute.svc:6379"},
		Pool:          "my-model",
		SnapshotURL:   "http://10.1.0.5:9090/debug/kvroute/snapshot",
		Lease:         3 * time.Second,
		RefreshPeriod: 250 * time.Millisecond,
		ReadPeriod:    250 * time.Millisecond,
	}
	router, err := kvroute.New(context.Background(), cfg, kvroute.Options{})
	if err != nil {
		panic(err)
	}
	defer router.Close()
	for _, p := range router.Cluster().Peers() {
		fmt.Println("peer", p.ID, "snapshot at", p.SnapshotURL)
	}
}
