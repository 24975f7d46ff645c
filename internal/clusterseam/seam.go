package clusterseam

import (
	"context"
	"time"

	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/tokenload"
)

// Store is the shared state of a pool of router replicas: what package
// cluster needs from Redis, and nothing more. Every method is one Redis
// exchange (a pipeline counts as one).
type Store interface {
	// Refresh writes a replica's record under key with a TTL of lease and
	// adds id to the member set members (SET key record PX lease; SADD
	// members id, pipelined).
	Refresh(ctx context.Context, key string, record []byte, lease time.Duration, members, id string) error
	// Members lists the member set (SMEMBERS, or SSCAN up to a bound).
	Members(ctx context.Context, members string) ([]string, error)
	// Get reads the records of keys (MGET); a key that does not exist (its
	// lease expired, or the replica left) has Value.OK false.
	Get(ctx context.Context, keys []string) ([]Value, error)
	// Forget removes ids from the member set (SREM).
	Forget(ctx context.Context, members string, ids []string) error
	// Leave deletes a replica's record and membership (DEL key; SREM
	// members id, pipelined).
	Leave(ctx context.Context, key, members, id string) error
	// Publish sends one decision message on channel (PUBLISH, or SPUBLISH
	// when the store is configured for sharded pub/sub).
	Publish(ctx context.Context, channel string, msg []byte) error
}

// Value is one key's value in a Get.
type Value struct {
	Data []byte
	OK   bool
}

// Manual is a cluster replica that runs no goroutine: its caller performs
// each step of the background work at the (virtual) time it chooses.
type Manual interface {
	// Refresh publishes the replica's local load and renews its lease.
	Refresh()
	// Read reads the peers' records into the load tracker.
	Read()
	// Queued is the number of decisions waiting to be published.
	Queued() int
	// Flush publishes the queued decisions (as the publishing goroutine
	// does, one message per batch) and reports how many it took.
	Flush() int
	// Apply applies a decision message received on the pool's channel
	// (the replica's own messages are skipped).
	Apply(msg []byte)
	// Channel is the pool's decision channel.
	Channel() string
}

// NewManual builds a Manual replica of the pool described by cfg (a
// cluster.Config; Addrs may be empty) over store, for index and tracker,
// with now as its clock and speculativeTTL as the lifetime of the
// speculative entries the peers' decisions create (0: the index's default). It returns the replica (a *cluster.Replica, to be
// attached to a Router) and its Manual face. Package cluster sets it.
var NewManual func(cfg any, index *kvindex.Index, tracker *tokenload.Tracker, store Store, now func() time.Time, speculativeTTL time.Duration) (replica any, m Manual, err error)

// AttachManual joins router (a *kvroute.Router built without
// Config.Cluster.Addrs, before its first Pick) to a pool through store as a
// Manual replica configured by cfg (a cluster.Config): its Picks then
// publish their decisions and see the peers' load as a Redis-backed
// replica's do, and its Close leaves the pool. The root kvroute package
// sets it.
var AttachManual func(router any, cfg any, store Store, now func() time.Time) (Manual, error)
