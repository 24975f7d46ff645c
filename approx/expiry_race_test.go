package approx

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/telemetry"
)

// gateClock is a Manual clock whose next Now, once armed, parks its caller
// until released: it holds a Record between shard (which returned the
// endpoint's lru) and taking the lru's lock.
type gateClock struct {
	*telemetry.Manual
	armed            atomic.Bool
	entered, release chan struct{}
}

func (c *gateClock) Now() time.Time {
	if c.armed.CompareAndSwap(true, false) {
		close(c.entered)
		<-c.release
	}
	return c.Manual.Now()
}

// The mode refresh forgets an endpoint whose entries have all expired; a
// Record that already holds the endpoint's lru, not yet locked, files its
// blocks in the endpoint's new lru instead of losing them as if the
// endpoint had been dropped.
func TestRecordHoldingAnExpiredLRUFilesItsBlocksAgain(t *testing.T) {
	clk := &gateClock{Manual: telemetry.NewManual(time.Unix(1_000_000, 0)), entered: make(chan struct{}), release: make(chan struct{})}
	ix, err := New(Config{Enabled: true, TTL: time.Minute}, Options{Set: telemetry.Set{Clock: clk}})
	require.NoError(t, err)
	require.NoError(t, ix.Bind(Binding{}))
	ix.SetEndpoints([]string{"a"})
	ix.Record("a", keys(1, 4))
	clk.Advance(2 * time.Minute) // the old entries have expired

	clk.armed.Store(true)
	done := make(chan struct{})
	go func() { defer close(done); ix.Record("a", keys(100, 4)) }() // a new decision routes to a
	<-clk.entered                                                   // Record holds a's lru, not yet its lock
	ix.Current()                                                    // a pick's mode refresh: expiry drops a's empty lru
	close(clk.release)
	<-done

	require.Equal(t, 4, ix.Match("a", keys(100, 4)))
	require.Equal(t, 4, ix.Entries("a"))
	require.Equal(t, Stats{Endpoints: 1, Entries: 4, Bytes: ix.Stats().Bytes, MaxBytes: ix.Config().MaxBytes}, ix.Stats())

	// An explicit Drop still wins over a Record holding the dropped lru.
	clk.entered, clk.release = make(chan struct{}), make(chan struct{})
	clk.armed.Store(true)
	done = make(chan struct{})
	go func() { defer close(done); ix.Record("a", keys(200, 4)) }()
	<-clk.entered
	require.Equal(t, 4, ix.Drop("a"))
	close(clk.release)
	<-done
	require.Zero(t, ix.Entries("a"))
	require.Zero(t, ix.Stats().Entries)
}

// expireAll finds an endpoint's lru empty and unlocks it before dropping
// it; a Record that fills the lru in between keeps its blocks: the drop
// checks again, under the index's lock and the lru's, that the lru is the
// endpoint's and still empty.
func TestExpiryDropSparesAnLRURefilledMeanwhile(t *testing.T) {
	ix, clk := newTest(t, Config{Enabled: true, TTL: time.Minute}, nil)
	ix.Record("a", keys(1, 4))
	clk.Advance(2 * time.Minute)
	ix.mu.RLock()
	l := ix.eps["a"]
	ix.mu.RUnlock()
	l.mu.Lock()
	l.expire(ix.now() - ix.ttl) // expireAll's pass: a is empty
	ix.entries.Add(int64(l.n - 4))
	l.mu.Unlock()

	ix.Record("a", keys(100, 4)) // before expireAll drops a
	ix.dropExpired("a", l)
	require.Equal(t, 4, ix.Match("a", keys(100, 4)))
	require.Equal(t, 4, ix.Stats().Entries)

	// A lru that is no longer the endpoint's is not dropped in its place.
	ix.Drop("a")
	ix.Record("a", keys(300, 2))
	ix.dropExpired("a", l)
	require.Equal(t, 2, ix.Entries("a"))
}
