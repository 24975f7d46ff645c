package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store is the shared state of a pool of router replicas: exactly the Redis
// operations a Replica performs (a leased record per replica, a member set,
// one multi-key read, and publishing decision messages), and nothing more.
// Every method is one Redis exchange (a pipeline counts as one). New uses
// Redis; NewManual takes any Store, such as the routing simulation's
// in-process, virtual-time one (bench/internal/sim).
type Store interface {
	// Refresh writes a replica's record under key with a TTL of lease,
	// adds id to the member set members and gives the set a TTL of lease
	// (SET key record PX lease; SADD members id; PEXPIRE members lease,
	// pipelined): the set outlives every live record, and goes by itself
	// a lease after the pool's last refresh.
	Refresh(ctx context.Context, key string, record []byte, lease time.Duration, members, id string) error
	// Members lists the member set (SMEMBERS, or SSCAN up to a bound).
	Members(ctx context.Context, members string) ([]string, error)
	// Get reads the records of keys (MGET), one Value per key in their
	// order (a reply of another length fails the read); a key that does not
	// exist (its lease expired, or the replica left) has Value.OK false.
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

// Value is one key's value in a Store's Get: its bytes, and whether the key
// exists.
type Value struct {
	Data []byte
	OK   bool
}

// redisStore is the shared state on Redis (or Valkey): the only Store a
// Replica uses outside the routing simulation. Each method is one round
// trip.
type redisStore struct {
	rdb        redis.UniversalClient
	sharded    bool // SPUBLISH instead of PUBLISH
	maxMembers int  // member IDs read at most (0: all); see Members
}

var _ Store = redisStore{}

func (s redisStore) Refresh(ctx context.Context, key string, record []byte, lease time.Duration, members, id string) error {
	pipe := s.rdb.Pipeline()
	pipe.Set(ctx, key, record, lease)
	pipe.SAdd(ctx, members, id)
	pipe.PExpire(ctx, members, lease)
	_, err := pipe.Exec(ctx)
	return err
}

// Members lists the member set. A pool's set is small and SSCAN returns
// it whole in one round trip, as SMEMBERS would; a set grown by garbage
// (anyone with access to Redis can add to it) is read only up to
// maxMembers IDs, so that a read's memory stays bounded whatever the set
// holds.
func (s redisStore) Members(ctx context.Context, members string) ([]string, error) {
	if s.maxMembers <= 0 {
		return s.rdb.SMembers(ctx, members).Result()
	}
	var ids []string
	var cursor uint64
	for {
		page, next, err := s.rdb.SScan(ctx, members, cursor, "", int64(s.maxMembers)).Result()
		if err != nil {
			return nil, err
		}
		ids = append(ids, page...)
		cursor = next
		if cursor == 0 || len(ids) >= s.maxMembers {
			break
		}
	}
	if len(ids) > s.maxMembers {
		ids = ids[:s.maxMembers]
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil // SSCAN may return an ID twice
}

func (s redisStore) Get(ctx context.Context, keys []string) ([]Value, error) {
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Value, len(vals))
	for i, v := range vals {
		if str, ok := v.(string); ok { // nil: no such key
			out[i] = Value{Data: []byte(str), OK: true}
		}
	}
	return out, nil
}

// getValues is s.Get, with a reply of another length than keys (a broken
// server or proxy, or a broken Store) an error: the readers index the
// values by their keys.
func getValues(ctx context.Context, s Store, keys []string) ([]Value, error) {
	vals, err := s.Get(ctx, keys)
	if err == nil && len(vals) != len(keys) {
		return nil, fmt.Errorf("cluster: MGET returned %d values for %d keys", len(vals), len(keys))
	}
	return vals, err
}

func (s redisStore) Forget(ctx context.Context, members string, ids []string) error {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return s.rdb.SRem(ctx, members, args...).Err()
}

func (s redisStore) Leave(ctx context.Context, key, members, id string) error {
	pipe := s.rdb.Pipeline()
	pipe.Del(ctx, key)
	pipe.SRem(ctx, members, id)
	_, err := pipe.Exec(ctx)
	return err
}

func (s redisStore) Publish(ctx context.Context, channel string, msg []byte) error {
	if s.sharded {
		return s.rdb.SPublish(ctx, channel, msg).Err()
	}
	return s.rdb.Publish(ctx, channel, msg).Err()
}
