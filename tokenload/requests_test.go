package tokenload

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/kvroute/kvroute/internal/leakcheck"
	"github.com/kvroute/kvroute/internal/syncbuf"
	"github.com/kvroute/kvroute/telemetry"
)

type testClock struct{ ns atomic.Int64 }

func (c *testClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// testClock moves only by Add, and its timers are the wall clock's: the
// table's expiry timer, a TTL of minutes away, never fires in the tests
// that use it, which see the expiry Register runs. The tests of the timer
// use a telemetry.Manual clock.
func (c *testClock) NewTimer(d time.Duration) telemetry.Timer   { return telemetry.Wall.NewTimer(d) }
func (c *testClock) NewTicker(d time.Duration) telemetry.Ticker { return telemetry.Wall.NewTicker(d) }
func (c *testClock) AfterFunc(d time.Duration, f func()) telemetry.Timer {
	return telemetry.Wall.AfterFunc(d, f)
}

type tableFixture struct {
	tr    *Tracker
	tab   *RequestTable
	reg   *prometheus.Registry
	clock *testClock
	logs  *syncbuf.Buffer
}

func newTableFixture(t *testing.T, cfg RequestTableConfig) *tableFixture {
	t.Helper()
	f := &tableFixture{reg: prometheus.NewRegistry(), clock: &testClock{}, logs: &syncbuf.Buffer{}}
	f.clock.ns.Store(time.Unix(1_700_000_000, 0).UnixNano())
	f.tr = newTracker(t)
	var err error
	f.tab, err = NewRequestTable(cfg, Options{Set: telemetry.Set{Registerer: f.reg, Logger: slog.New(slog.NewTextHandler(f.logs, nil)), Clock: f.clock}})
	require.NoError(t, err)
	t.Cleanup(f.tab.Close) // stops the expiry timer
	return f
}

func (f *tableFixture) dispatch(t *testing.T, id, ep string, tokens int64) *Inflight {
	t.Helper()
	h := f.tr.Dispatch(ep, tokens)
	require.NoError(t, f.tab.Register(id, h))
	return h
}

func (f *tableFixture) count(t *testing.T, outcome string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "kvroute_tokenload_request_ids_total" {
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series for outcome %s", outcome)
	return 0
}

func TestRequestTableLifecycleByID(t *testing.T) {
	f := newTableFixture(t, RequestTableConfig{})
	h := f.dispatch(t, "a", "ep", 100)
	require.ErrorIs(t, f.tab.Register("a", f.tr.Dispatch("ep", 5)), ErrDuplicateRequestID)
	requireLoad(t, f.tr, "ep", 105, 2) // the refused handle is the caller's to release
	require.True(t, f.tab.FirstChunk("a"))
	requireLoad(t, f.tr, "ep", 5, 2)
	h.FirstChunk()
	require.True(t, f.tab.Done("a"))
	requireLoad(t, f.tr, "ep", 5, 1)
	require.False(t, f.tab.Done("a"))
	require.False(t, f.tab.FirstChunk("a"))
	h.Done()
	requireLoad(t, f.tr, "ep", 5, 1)
	require.ErrorIs(t, f.tab.Register("", h), ErrInvalidRequestID)
	require.ErrorIs(t, f.tab.Register(strings.Repeat("x", MaxRequestIDBytes+1), h), ErrInvalidRequestID)
	require.NoError(t, f.tab.Register(strings.Repeat("x", MaxRequestIDBytes), f.tr.Dispatch("ep", 0)))
	require.Equal(t, 1, f.tab.Len())
	require.Equal(t, 1.0, testutil.ToFloat64(f.tab.entries))
	require.Equal(t, 2.0, f.count(t, IDRegistered))
	require.Equal(t, 1.0, f.count(t, IDDuplicate))
	require.Equal(t, 2.0, f.count(t, IDInvalid))
	require.Equal(t, 2.0, f.count(t, IDUnknown))
}

func TestRequestTableForgetOnlyItsOwnHandle(t *testing.T) {
	f := newTableFixture(t, RequestTableConfig{})
	h1 := f.dispatch(t, "a", "ep", 10)
	h1.Done()
	f.tab.Forget("a", h1)
	f.dispatch(t, "a", "ep", 20) // the ID is reused
	f.tab.Forget("a", h1)        // a stale Forget leaves the new request alone
	require.Equal(t, 1, f.tab.Len())
	require.True(t, f.tab.Done("a"))
	requireLoad(t, f.tr, "ep", 0, 0)
	require.Zero(t, f.count(t, IDUnknown))
}

// A request whose end never comes is released after the TTL, on the next
// Register, counted and warned about once per interval.
func TestRequestTableTTLReleasesForgottenRequests(t *testing.T) {
	f := newTableFixture(t, RequestTableConfig{TTL: time.Minute})
	f.dispatch(t, "lost-1", "ep", 1000)
	f.dispatch(t, "lost-2", "ep", 500)
	f.clock.Add(30 * time.Second)
	f.dispatch(t, "young", "ep", 7)
	requireLoad(t, f.tr, "ep", 1507, 3)
	f.clock.Add(30 * time.Second) // lost-* are a minute old, young is not
	f.dispatch(t, "next", "ep", 1)
	requireLoad(t, f.tr, "ep", 8, 2)
	require.Equal(t, 2, f.tab.Len())
	require.Equal(t, 2.0, f.count(t, IDExpired))
	require.Equal(t, 1, strings.Count(f.logs.String(), "outcome=expired"), "one warning per interval: %s", f.logs.String())
	require.False(t, f.tab.Done("lost-1"), "an expired request is unknown")
	require.True(t, f.tab.Done("young"))
	require.True(t, f.tab.Done("next"))
	requireLoad(t, f.tr, "ep", 0, 0)
}

// At MaxRequests the oldest request is released and dropped: memory and
// phantom load stay bounded however many ends a host loses.
func TestRequestTableBoundEvictsOldest(t *testing.T) {
	f := newTableFixture(t, RequestTableConfig{MaxRequests: 3})
	for i := 0; i < 10; i++ {
		f.dispatch(t, fmt.Sprint("r", i), "ep", 10)
		require.LessOrEqual(t, f.tab.Len(), 3)
	}
	requireLoad(t, f.tr, "ep", 30, 3)
	require.Equal(t, 7.0, f.count(t, IDEvicted))
	require.Equal(t, 1, strings.Count(f.logs.String(), "outcome=evicted"))
	for i := 0; i < 7; i++ {
		require.False(t, f.tab.Done(fmt.Sprint("r", i)))
	}
	for i := 7; i < 10; i++ {
		require.True(t, f.tab.Done(fmt.Sprint("r", i)))
	}
	requireLoad(t, f.tr, "ep", 0, 0)
	f.clock.Add(2 * time.Minute)
	f.dispatch(t, "later", "ep", 1)
	f.dispatch(t, "later2", "ep", 1)
	f.dispatch(t, "later3", "ep", 1)
	f.dispatch(t, "later4", "ep", 1)
	require.Equal(t, 2, strings.Count(f.logs.String(), "outcome=evicted"), "warned again after the interval")
}

func TestRequestTableConfigErrors(t *testing.T) {
	_, err := NewRequestTable(RequestTableConfig{MaxRequests: -1}, Options{})
	require.Error(t, err)
	_, err = NewRequestTable(RequestTableConfig{TTL: -time.Second}, Options{})
	require.Error(t, err)
	reg := prometheus.NewRegistry()
	_, err = NewRequestTable(RequestTableConfig{}, Options{Set: telemetry.Set{Registerer: reg}})
	require.NoError(t, err)
	_, err = NewRequestTable(RequestTableConfig{}, Options{Set: telemetry.Set{Registerer: reg}})
	require.Error(t, err, "two tables in one registry")
}

// Register, FirstChunk and Done by ID race from many goroutines with a
// table small enough to evict; each request is released exactly once.
func TestRequestTableConcurrent(t *testing.T) {
	f := newTableFixture(t, RequestTableConfig{MaxRequests: 64})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				id := fmt.Sprintf("g%d-%d", g, i)
				h := f.tr.Dispatch(fmt.Sprint("ep", i%3), int64(i))
				if err := f.tab.Register(id, h); err != nil {
					t.Error(err)
					return
				}
				if i%5 == 0 {
					continue // lost: left to the bound
				}
				f.tab.FirstChunk(id)
				if i%2 == 0 {
					h.Done()
					f.tab.Forget(id, h)
				} else {
					f.tab.Done(id)
				}
			}
		}(g)
	}
	wg.Wait()
	var held int64
	f.tr.Range(func(_ string, tokens, requests int64) bool { held += requests; return true })
	require.EqualValues(t, f.tab.Len(), held, "exactly the table's entries are still counted")
}

func TestRequestTableHotPathAllocations(t *testing.T) {
	f := newTableFixture(t, RequestTableConfig{})
	f.tr.Dispatch("ep", 0).Done()
	var h Inflight
	allocs := testing.AllocsPerRun(1000, func() {
		f.tr.DispatchInto(&h, "ep", 64)
		_ = f.tab.Register("id", &h)
		f.tab.FirstChunk("id")
		f.tab.Done("id")
	})
	require.LessOrEqual(t, allocs, 1.0, "one entry per registered request")
}

// endedHandle is a Handle that is more than an Inflight: it records that
// the table ended it.
type endedHandle struct {
	*Inflight
	ended atomic.Int32
}

func (h *endedHandle) Done() { h.ended.Add(1); h.Inflight.Done() }

// A handle of the host's own type is ended by the table's eviction and
// expiry, and Get finds it without unfiling it.
func TestRequestTableEndsAnyHandle(t *testing.T) {
	f := newTableFixture(t, RequestTableConfig{MaxRequests: 2, TTL: time.Minute})
	a := &endedHandle{Inflight: f.tr.Dispatch("ep", 10)}
	b := &endedHandle{Inflight: f.tr.Dispatch("ep", 20)}
	require.NoError(t, f.tab.Register("a", a))
	require.NoError(t, f.tab.Register("b", b))
	got, ok := f.tab.Get("a")
	require.True(t, ok)
	require.Same(t, a, got.(*endedHandle))
	require.Equal(t, 2, f.tab.Len(), "Get leaves the entry filed")
	_, ok = f.tab.Get("nope")
	require.False(t, ok)
	require.Equal(t, 1.0, f.count(t, IDUnknown))

	require.NoError(t, f.tab.Register("c", f.tr.Dispatch("ep", 0)))
	require.EqualValues(t, 1, a.ended.Load(), "evicted: ended")
	f.clock.Add(time.Minute)
	require.NoError(t, f.tab.Register("d", f.tr.Dispatch("ep", 0)))
	require.EqualValues(t, 1, b.ended.Load(), "expired: ended")
	require.EqualValues(t, 1, a.ended.Load())
	requireLoad(t, f.tr, "ep", 0, 1)
}

// signalHandle is an Inflight whose first Done, from whichever goroutine,
// closes ended: a test waits on it for the table's expiry timer.
type signalHandle struct {
	*Inflight
	once  sync.Once
	ended chan struct{}
}

func newSignalHandle(h *Inflight) *signalHandle {
	return &signalHandle{Inflight: h, ended: make(chan struct{})}
}

func (h *signalHandle) Done() {
	h.Inflight.Done()
	h.once.Do(func() { close(h.ended) })
}

// waitEnded waits for the table to end h.
func waitEnded(t *testing.T, h *signalHandle, what string) {
	t.Helper()
	select {
	case <-h.ended:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s not released within 20s", what)
	}
}

// A request whose Done is lost is released once its TTL has passed on the
// injected clock, by the table's expiry timer, although nothing more is
// registered (no traffic, or an admission stage queuing every request
// because that phantom load saturates the endpoint); the timer then
// re-arms for the next oldest entry. Expiry used to run only in Register,
// and the phantom load stayed as long as no other request came.
func TestRequestTableReleasesALostRequestAfterTTLWithoutAnotherRegister(t *testing.T) {
	clock := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	tr := newTracker(t)
	reg := prometheus.NewRegistry()
	tab, err := NewRequestTable(RequestTableConfig{TTL: time.Minute}, Options{Set: telemetry.Set{Registerer: reg, Clock: clock}})
	require.NoError(t, err)
	t.Cleanup(tab.Close)
	lost := newSignalHandle(tr.Dispatch("e:1", 5000))
	require.NoError(t, tab.Register("lost", lost)) // its Done never comes
	clock.Advance(30 * time.Second)
	young := newSignalHandle(tr.Dispatch("e:1", 7))
	require.NoError(t, tab.Register("young", young))
	require.Equal(t, 1, clock.Waiters(), "one timer for the table, for its oldest entry")

	clock.Advance(30 * time.Second) // lost is a minute old
	waitEnded(t, lost, "the lost request")
	clock.WaitForWaiters(1) // re-armed for young
	requireLoad(t, tr, "e:1", 7, 1)
	require.Equal(t, 1, tab.Len())
	select {
	case <-young.ended:
		t.Fatal("young released before its TTL")
	default:
	}
	clock.Advance(30 * time.Second) // young is a minute old
	waitEnded(t, young, "the second lost request")
	requireLoad(t, tr, "e:1", 0, 0)
	require.Equal(t, 0, tab.Len())
	require.Equal(t, 2.0, testutil.ToFloat64(tab.ids[IDExpired]))
}

// Close stops the expiry timer and waits for an expiry under way: a closed
// table leaves no goroutine and no armed timer behind, and expires only on
// Register.
func TestRequestTableCloseStopsTheExpiryTimer(t *testing.T) {
	defer leakcheck.Check(t)()
	clock := telemetry.NewManual(time.Unix(1_700_000_000, 0))
	tr := newTracker(t)
	tab, err := NewRequestTable(RequestTableConfig{TTL: time.Minute}, Options{Set: telemetry.Set{Clock: clock}})
	require.NoError(t, err)
	first := newSignalHandle(tr.Dispatch("e:1", 10))
	require.NoError(t, tab.Register("first", first))
	clock.Advance(time.Minute) // the timer's goroutine runs
	waitEnded(t, first, "the lost request")
	require.NoError(t, tab.Register("second", tr.Dispatch("e:1", 20))) // after the expiry: the table was empty
	require.Equal(t, 1, clock.Waiters(), "Register armed the timer again")
	tab.Close()
	require.Equal(t, 0, clock.Waiters(), "Close disarmed the timer")
	clock.Advance(time.Hour)
	require.Equal(t, 1, tab.Len(), "no expiry after Close but on Register")
	require.NoError(t, tab.Register("third", tr.Dispatch("e:1", 30)))
	require.Equal(t, 1, tab.Len())
	require.True(t, tab.Done("third"))
	requireLoad(t, tr, "e:1", 0, 0)
}
