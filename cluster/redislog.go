package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// redisLog carries go-redis's own log lines into kvroute's logger. go-redis
// has one process-wide logger (redis.SetLogger) that writes unstructured
// lines to standard error: several per Redis start or stop (a broken pool
// connection, a resubscribe, a discarded PubSub connection), beside the
// one line per outage this package logs. Each Replica started routes them
// to its logger at Debug level, the last one started taking them; a host
// that wants them elsewhere calls redis.SetLogger after starting its
// replicas.
var redisLog struct {
	once   sync.Once
	logger atomic.Pointer[slog.Logger]
}

// redisLogger is the go-redis logger (its internal.Logging interface) that
// writes to redisLog's current logger.
type redisLogger struct{}

// Printf logs one go-redis line as a Debug record "go-redis" with the
// line in its "detail" attribute.
func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l := redisLog.logger.Load()
	if l == nil || !l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	detail := strings.TrimPrefix(strings.TrimSpace(fmt.Sprintf(format, v...)), "redis: ")
	l.LogAttrs(ctx, slog.LevelDebug, "go-redis", slog.String("detail", detail))
}

// routeRedisLogs makes l the logger of go-redis's lines.
func routeRedisLogs(l *slog.Logger) {
	redisLog.logger.Store(l)
	redisLog.once.Do(func() { redis.SetLogger(redisLogger{}) })
}
