package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/redistest"
	"github.com/kvroute/kvroute/kvindex"
	"github.com/kvroute/kvroute/telemetry"
	"github.com/kvroute/kvroute/tokenload"
)

// clockedReplica joins pool "clk" on a real redis-server with the manual
// clock clk, refreshing every minute and reading every hour.
func clockedReplica(t *testing.T, addr string, clk *telemetry.Manual, mutate func(*Config)) (*Replica, *tokenload.Tracker) {
	t.Helper()
	ix, err := kvindex.New(kvindex.Config{SweepInterval: -1}, kvindex.Options{})
	require.NoError(t, err)
	t.Cleanup(ix.Close)
	tr, err := tokenload.NewTracker(tokenload.Options{})
	require.NoError(t, err)
	cfg := Config{Addrs: []string{addr}, Pool: "clk", ReplicaID: "a", Lease: 3 * time.Hour,
		RefreshPeriod: time.Minute, ReadPeriod: time.Hour, OpTimeout: 5 * time.Second}
	if mutate != nil {
		mutate(&cfg)
	}
	r, err := New(cfg, ix, tr, Options{Set: telemetry.Set{Clock: clk}})
	require.NoError(t, err)
	t.Cleanup(r.Close)
	return r, tr
}

// armed waits until n timers and tickers are armed on clk.
func armed(t *testing.T, clk *telemetry.Manual, n int, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return clk.Waiters() == n }, deltaWait, time.Millisecond, what)
}

// The refresh loop runs on the replica's clock: the load dispatched after
// New reaches the replica's record when the clock passes one refresh
// period, and not before.
func TestRefreshLoopTicksOnTheReplicaClock(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	r, tr := clockedReplica(t, srv.Addr, clk, func(c *Config) { c.DisableSharedDecisions = true })
	defer r.Close()
	armed(t, clk, 2, "the refresh and read tickers")
	record := func() [2]int64 {
		data, err := rdb.Get(context.Background(), r.keys.selfKey).Bytes()
		require.NoError(t, err)
		rec, err := decodeRecord(data, DefaultMaxEndpoints)
		require.NoError(t, err)
		var l [2]int64
		for _, e := range rec.Loads {
			l[0], l[1] = l[0]+e.Tokens, l[1]+e.Requests
		}
		return l
	}
	require.Equal(t, [2]int64{}, record(), "New's refresh: no load yet")

	tr.Dispatch("10.0.0.1:8000", 700)
	clk.Advance(time.Minute - time.Millisecond)
	require.Equal(t, [2]int64{}, record(), "no refresh before the period")
	clk.Advance(time.Millisecond)
	require.Eventually(t, func() bool { return record() == [2]int64{700, 1} }, deltaWait, time.Millisecond,
		"the refresh at one period published the load")
}

// The publisher waits PublishInterval on the replica's clock between
// messages, so the decisions made meanwhile join the next one.
func TestPublishIntervalOnTheReplicaClock(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	r, _ := clockedReplica(t, srv.Addr, clk, func(c *Config) { c.PublishInterval = time.Minute })
	defer r.Close()
	armed(t, clk, 2, "the refresh and read tickers")
	keys := []kvindex.Key{1, 2, 3}

	r.Publish("10.0.0.1:8000", keys)
	require.Eventually(t, func() bool { return r.Stats().Messages == 1 }, deltaWait, time.Millisecond,
		"the first decision goes out at once")
	r.Publish("10.0.0.2:8000", keys)
	armed(t, clk, 3, "the publisher waits out the interval")
	r.Publish("10.0.0.3:8000", keys)
	require.Equal(t, int64(1), r.Stats().Messages)
	clk.Advance(time.Minute)
	require.Eventually(t, func() bool { return r.Stats().Messages == 2 }, deltaWait, time.Millisecond,
		"one interval later, one message")
	require.Equal(t, int64(3), r.Stats().Published, "with both decisions made meanwhile")
}

// A load change does not wait out PublishInterval: a dispatch made while
// the publisher waits for the interval wakes it, and the change goes out at
// once, with the decisions queued meanwhile, before the replica's clock
// moves; a decision alone still waits the interval.
func TestLoadChangeCutsThePublishIntervalShort(t *testing.T) {
	defer leakcheck.Check(t)()
	srv := redistest.Start(t)
	defer srv.Stop()
	clk := telemetry.NewManual(time.Unix(1_800_000_000, 0))
	r, tr := clockedReplica(t, srv.Addr, clk, func(c *Config) { c.PublishInterval = time.Minute })
	defer r.Close()
	armed(t, clk, 2, "the refresh and read tickers")
	keys := []kvindex.Key{1, 2, 3}

	r.Publish("10.0.0.1:8000", keys)
	require.Eventually(t, func() bool { return r.Stats().Messages == 1 }, deltaWait, time.Millisecond,
		"the first decision goes out at once")
	r.Publish("10.0.0.2:8000", keys)
	armed(t, clk, 3, "the publisher waits out the interval for a decision")
	require.Equal(t, int64(1), r.Stats().Messages)

	h := tr.Dispatch("10.0.0.2:8000", 700)
	defer h.Done()
	require.Eventually(t, func() bool { return r.Stats().Messages == 2 }, deltaWait, time.Millisecond,
		"the dispatch's load change goes out without the clock moving")
	st := r.Stats()
	require.Equal(t, int64(2), st.Published, "with the decision that waited")
	require.Equal(t, int64(1), st.Deltas)
}
