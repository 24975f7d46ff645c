package cluster

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvroute/kvroute/internal/clusterseam"
)

// redisStore is the shared state on Redis (or Valkey): the only Store a
// Replica uses outside the routing simulation. Each method is one round
// trip.
type redisStore struct {
	rdb     redis.UniversalClient
	sharded bool // SPUBLISH instead of PUBLISH
}

var _ clusterseam.Store = redisStore{}

func (s redisStore) Refresh(ctx context.Context, key string, record []byte, lease time.Duration, members, id string) error {
	pipe := s.rdb.Pipeline()
	pipe.Set(ctx, key, record, lease)
	pipe.SAdd(ctx, members, id)
	_, err := pipe.Exec(ctx)
	return err
}

func (s redisStore) Members(ctx context.Context, members string) ([]string, error) {
	return s.rdb.SMembers(ctx, members).Result()
}

func (s redisStore) Get(ctx context.Context, keys []string) ([]clusterseam.Value, error) {
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	out := make([]clusterseam.Value, len(vals))
	for i, v := range vals {
		if str, ok := v.(string); ok { // nil: no such key
			out[i] = clusterseam.Value{Data: []byte(str), OK: true}
		}
	}
	return out, nil
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
