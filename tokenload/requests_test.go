package tokenload

import (
	"bytes"
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

	"github.com/kvroute/kvroute/telemetry"
)

type testClock struct{ ns atomic.Int64 }

func (c *testClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// The table sets no timers; testClock is a telemetry.Clock for its Now.
func (c *testClock) NewTimer(d time.Duration) telemetry.Timer   { return telemetry.Wall.NewTimer(d) }
func (c *testClock) NewTicker(d time.Duration) telemetry.Ticker { return telemetry.Wall.NewTicker(d) }
func (c *testClock) AfterFunc(d time.Duration, f func()) telemetry.Timer {
	return telemetry.Wall.AfterFunc(d, f)
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type tableFixture struct {
	tr    *Tracker
	tab   *RequestTable
	reg   *prometheus.Registry
	clock *testClock
	logs  *syncBuffer
}

func newTableFixture(t *testing.T, cfg RequestTableConfig) *tableFixture {
	t.Helper()
	f := &tableFixture{reg: prometheus.NewRegistry(), clock: &testClock{}, logs: &syncBuffer{}}
	f.clock.ns.Store(time.Unix(1_700_000_000, 0).UnixNano())
	f.tr = newTracker(t)
	var err error
	f.tab, err = NewRequestTable(cfg, Options{Set: telemetry.Set{Registerer: f.reg, Logger: slog.New(slog.NewTextHandler(f.logs, nil)), Clock: f.clock}})
	require.NoError(t, err)
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
