package tokenload

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func newTracker(t testing.TB) *Tracker {
	t.Helper()
	tr, err := NewTracker(Options{})
	require.NoError(t, err)
	return tr
}

func requireLoad(t *testing.T, tr *Tracker, ep string, tokens, requests int64) {
	t.Helper()
	gotTokens, gotRequests, ok := tr.Load(ep)
	require.True(t, ok, "endpoint %s has counters", ep)
	require.Equal(t, [2]int64{tokens, requests}, [2]int64{gotTokens, gotRequests}, "tokens, requests of %s", ep)
}

func TestTrackerLifecycle(t *testing.T) {
	tr := newTracker(t)
	_, _, ok := tr.Load("10.0.0.1:8000")
	require.False(t, ok)

	a := tr.Dispatch("10.0.0.1:8000", 6000)
	b := tr.Dispatch("10.0.0.1:8000", 2000)
	c := tr.Dispatch("10.0.0.2:8000", 500)
	require.Equal(t, "10.0.0.1:8000", a.Endpoint())
	requireLoad(t, tr, "10.0.0.1:8000", 8000, 2)
	requireLoad(t, tr, "10.0.0.2:8000", 500, 1)

	a.FirstChunk() // prefill done: tokens released, request still open
	requireLoad(t, tr, "10.0.0.1:8000", 2000, 2)
	held, open := a.Held()
	require.Zero(t, held)
	require.True(t, open)

	a.FirstChunk() // later chunks change nothing
	a.Done()
	a.Done()
	requireLoad(t, tr, "10.0.0.1:8000", 2000, 1)

	b.Done() // aborted before its first chunk: tokens and request released
	requireLoad(t, tr, "10.0.0.1:8000", 0, 0)
	b.FirstChunk()
	requireLoad(t, tr, "10.0.0.1:8000", 0, 0)
	requireLoad(t, tr, "10.0.0.2:8000", 500, 1)
	c.Done()
	requireLoad(t, tr, "10.0.0.2:8000", 0, 0)
	require.Equal(t, 2, tr.Len())
}

func TestTrackerNegativeTokensCountAsZero(t *testing.T) {
	tr := newTracker(t)
	h := tr.Dispatch("ep", -100)
	requireLoad(t, tr, "ep", 0, 1)
	h.Done()
	requireLoad(t, tr, "ep", 0, 0)
}

func TestInflightZeroAndNilAreNoOps(t *testing.T) {
	var h Inflight
	h.FirstChunk()
	h.Done()
	held, open := h.Held()
	require.Zero(t, held)
	require.False(t, open)
	require.Empty(t, h.Endpoint())
	var nilH *Inflight
	nilH.FirstChunk()
	nilH.Done()
	held, open = nilH.Held()
	require.Zero(t, held, "a nil Inflight holds nothing, as the zero value")
	require.False(t, open)
	require.Empty(t, nilH.Endpoint())
}

func TestTrackerDispatchIntoReusesHandle(t *testing.T) {
	tr := newTracker(t)
	var h Inflight
	tr.DispatchInto(&h, "a", 100)
	requireLoad(t, tr, "a", 100, 1)
	// Reusing a handle that still holds load releases it first.
	tr.DispatchInto(&h, "b", 30)
	requireLoad(t, tr, "a", 0, 0)
	requireLoad(t, tr, "b", 30, 1)
	h.Done()
	tr.DispatchInto(&h, "b", 7)
	requireLoad(t, tr, "b", 7, 1)
	h.Done()
	requireLoad(t, tr, "b", 0, 0)
}

func TestTrackerRemoveAndReAdd(t *testing.T) {
	tr := newTracker(t)
	old := tr.Dispatch("10.0.0.1:8000", 1000)
	require.True(t, tr.Remove("10.0.0.1:8000"))
	require.False(t, tr.Remove("10.0.0.1:8000"))
	_, _, ok := tr.Load("10.0.0.1:8000")
	require.False(t, ok, "removed endpoints have no counters")

	fresh := tr.Dispatch("10.0.0.1:8000", 300) // re-added under the same ID
	requireLoad(t, tr, "10.0.0.1:8000", 300, 1)
	old.FirstChunk()
	old.Done()
	requireLoad(t, tr, "10.0.0.1:8000", 300, 1) // untouched by the stale release
	fresh.Done()
	requireLoad(t, tr, "10.0.0.1:8000", 0, 0)
}

// Every handle gets FirstChunk and Done from several goroutines at once;
// afterwards every counter is exactly zero, so each release happened exactly
// once.
func TestTrackerConcurrentReleasesHappenExactlyOnce(t *testing.T) {
	tr := newTracker(t)
	const endpoints, perEndpoint, callers = 4, 200, 4
	handles := make([]*Inflight, 0, endpoints*perEndpoint)
	for e := range endpoints {
		for i := range perEndpoint {
			handles = append(handles, tr.Dispatch(fmt.Sprintf("10.0.0.%d:8000", e), int64(100+i)))
		}
	}
	for e := range endpoints {
		requireLoad(t, tr, fmt.Sprintf("10.0.0.%d:8000", e), perEndpoint*100+perEndpoint*(perEndpoint-1)/2, perEndpoint)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i, h := range handles {
				if (i+c)%2 == 0 {
					h.FirstChunk()
					h.Done()
				} else {
					h.Done()
					h.FirstChunk()
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	for e := range endpoints {
		requireLoad(t, tr, fmt.Sprintf("10.0.0.%d:8000", e), 0, 0)
	}
}

// Dispatches and releases race with endpoint removal and re-adding; the
// counters that exist at the end reflect exactly the handles dispatched after
// the last removal that are still open.
func TestTrackerConcurrentRemoval(t *testing.T) {
	tr := newTracker(t)
	const ep = "10.0.0.9:8000"
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var stale []*Inflight
	for range 50 {
		stale = append(stale, tr.Dispatch(ep, 1000))
	}
	wg.Add(2)
	go func() { // releases of handles dispatched before the removal
		defer wg.Done()
		for _, h := range stale {
			h.FirstChunk()
			h.Done()
		}
	}()
	go func() { // unrelated churn on another endpoint
		defer wg.Done()
		for {
			tr.Dispatch("other", 5).Done()
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	require.True(t, tr.Remove(ep))
	var fresh []*Inflight
	for range 20 {
		fresh = append(fresh, tr.Dispatch(ep, 10))
	}
	close(stop)
	wg.Wait()
	requireLoad(t, tr, ep, 200, 20)
	requireLoad(t, tr, "other", 0, 0)
	for _, h := range fresh {
		h.Done()
	}
	requireLoad(t, tr, ep, 0, 0)
}

func TestSubClampedNeverGoesBelowZero(t *testing.T) {
	var a atomic.Int64
	a.Store(5)
	subClamped(&a, 10)
	require.Zero(t, a.Load())

	a.Store(100)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				subClamped(&a, 3)
				if a.Load() < 0 {
					t.Error("counter below zero")
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Zero(t, a.Load())
}

func TestTrackerRangeAndPrune(t *testing.T) {
	tr := newTracker(t)
	for _, ep := range []string{"a", "b", "c"} {
		tr.Dispatch(ep, 1)
	}
	keep := map[string]bool{"b": true}
	tr.Range(func(ep string, tokens, requests int64) bool {
		require.Equal(t, [2]int64{1, 1}, [2]int64{tokens, requests})
		if !keep[ep] {
			tr.Remove(ep)
		}
		return true
	})
	require.Equal(t, 1, tr.Len())
	_, _, ok := tr.Load("b")
	require.True(t, ok)

	n := 0
	tr.Dispatch("d", 1)
	tr.Range(func(string, int64, int64) bool { n++; return false })
	require.Equal(t, 1, n, "Range stops when fn returns false")
}

func TestTrackerHotPathDoesNotAllocate(t *testing.T) {
	tr := newTracker(t)
	tr.Dispatch("10.0.0.1:8000", 0).Done() // counters exist
	var h Inflight
	allocs := testing.AllocsPerRun(1000, func() {
		tr.DispatchInto(&h, "10.0.0.1:8000", 2048)
		if _, _, ok := tr.Load("10.0.0.1:8000"); !ok {
			t.Fatal("no counters")
		}
		h.FirstChunk()
		h.Done()
	})
	require.Zero(t, allocs)
}
