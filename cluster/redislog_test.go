package cluster

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// records is a slog handler that keeps every record as "LEVEL message
// detail".
type records struct {
	mu   sync.Mutex
	recs []string
}

func (c *records) Enabled(context.Context, slog.Level) bool { return true }
func (c *records) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "detail" {
			line += " " + a.Value.String()
		}
		return true
	})
	c.mu.Lock()
	c.recs = append(c.recs, line)
	c.mu.Unlock()
	return nil
}
func (c *records) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *records) WithGroup(string) slog.Handler      { return c }

func (c *records) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.recs...)
}

// With Redis stopped and started again, the operator's log at Info level
// holds one line when the outage starts and one when it ends; go-redis's
// own lines about it arrive in the same logger as Debug records instead of
// unstructured lines on standard error.
func TestRedisOutageIsOneInfoLineAndGoRedisLogsAreRouted(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	defer ix.Close()
	tr, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	logs := &records{}
	r, err := New(Config{Addrs: []string{srv.Addr}, Pool: "logs", ReplicaID: "a", RefreshPeriod: 20 * time.Millisecond,
		ReadPeriod: 20 * time.Millisecond, OpTimeout: time.Second}, ix, tr, Options{Set: telemetry.Set{Logger: slog.New(logs)}})
	require.NoError(t, err)
	defer r.Close()
	require.Eventually(t, func() bool { return !r.Degraded() && r.Stats().Reads > 0 }, 20*time.Second, 5*time.Millisecond)

	require.NoError(t, srv.Stop())
	require.Eventually(t, r.Degraded, 20*time.Second, 5*time.Millisecond)
	// The loops keep dialling while Redis is down, and go-redis logs a failed
	// dial: wait for one before the restart, since a short outage may see no
	// dial at all.
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(logs.all(), func(l string) bool { return strings.HasPrefix(l, "DEBUG go-redis ") })
	}, 20*time.Second, 5*time.Millisecond, "go-redis's lines about the outage reach kvroute's logger")
	require.NoError(t, srv.Restart())
	require.Eventually(t, func() bool { return !r.Degraded() }, 20*time.Second, 5*time.Millisecond)
	reads := r.Stats().Reads
	require.Eventually(t, func() bool { return r.Stats().Reads > reads+2 }, 20*time.Second, 5*time.Millisecond)

	var info, goRedis []string
	for _, l := range logs.all() {
		switch {
		case strings.HasPrefix(l, "DEBUG go-redis "):
			goRedis = append(goRedis, l)
		case !strings.HasPrefix(l, "DEBUG"):
			info = append(info, l)
		}
	}
	require.Len(t, info, 2, "one line per outage start and end: %q", info)
	require.Contains(t, info[0], "Redis unreachable")
	require.Contains(t, info[1], "Redis answers again")
	require.NotEmpty(t, goRedis, "go-redis's lines about the outage reach kvroute's logger")
	t.Logf("go-redis lines routed at Debug: %d, e.g. %q", len(goRedis), goRedis[0])
}
