package sim

import (
	"container/heap"
	"sync"
	"time"

	"github.com/kvroute/kvroute/telemetry"
)

// stepClock is the telemetry.Clock the admission Controller runs on in the
// overload study: the simulation's virtual time, with timers the
// simulation fires itself, one at a time, in due order. AfterFunc runs its
// function in the simulation's own goroutine (the Controller's re-check),
// NewTimer's channel is sent to from it (a queued request's deadline), and
// every NewTimer call is reported on created before it returns, so the
// simulation knows a request has queued (admission.Controller arms a
// request's deadline timer only once the request is in the queue).
type stepClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  stepTimers
	seq     uint64
	created chan *stepTimer
}

func newStepClock(start time.Time) *stepClock {
	return &stepClock{now: start, created: make(chan *stepTimer)}
}

// stepTimer is one timer or AfterFunc of a stepClock.
type stepTimer struct {
	clk   *stepClock
	c     chan time.Time // NewTimer's
	f     func()         // AfterFunc's
	due   time.Time
	seq   uint64
	armed bool
	idx   int // in clk.timers; -1 when not there
	owner int // the request whose Admit created it (NewTimer), -1 otherwise
}

// Now implements telemetry.Clock.
func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// set moves the clock to t (the simulation's loop; no timer fires).
func (c *stepClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// NewTimer implements telemetry.Clock and reports the timer on created.
func (c *stepClock) NewTimer(d time.Duration) telemetry.Timer {
	t := &stepTimer{clk: c, c: make(chan time.Time, 1), idx: -1, owner: -1}
	t.Reset(d)
	c.created <- t
	return t
}

// NewTicker implements telemetry.Clock; the admission uses no ticker, and
// this one never ticks.
func (c *stepClock) NewTicker(time.Duration) telemetry.Ticker { return stepTicker{} }

// AfterFunc implements telemetry.Clock: f runs in the simulation's loop
// when the clock reaches the due time.
func (c *stepClock) AfterFunc(d time.Duration, f func()) telemetry.Timer {
	t := &stepTimer{clk: c, f: f, idx: -1, owner: -1}
	t.Reset(d)
	return t
}

// next returns the earliest armed timer's due time.
func (c *stepClock) next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].due, true
}

// popDue disarms and returns the earliest timer due at or before now, or nil.
func (c *stepClock) popDue() *stepTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 || c.timers[0].due.After(c.now) {
		return nil
	}
	t := heap.Pop(&c.timers).(*stepTimer)
	t.armed = false
	return t
}

// C implements telemetry.Timer.
func (t *stepTimer) C() <-chan time.Time { return t.c }

// Stop implements telemetry.Timer.
func (t *stepTimer) Stop() bool {
	c := t.clk
	c.mu.Lock()
	defer c.mu.Unlock()
	was := t.armed
	if t.idx >= 0 {
		heap.Remove(&c.timers, t.idx)
	}
	t.armed = false
	return was
}

// Reset implements telemetry.Timer.
func (t *stepTimer) Reset(d time.Duration) bool {
	c := t.clk
	c.mu.Lock()
	defer c.mu.Unlock()
	was := t.armed
	if t.idx >= 0 {
		heap.Remove(&c.timers, t.idx)
	}
	c.seq++
	t.due, t.seq, t.armed = c.now.Add(max(d, 0)), c.seq, true
	heap.Push(&c.timers, t)
	return was
}

// stepTimers orders armed timers by due time, then by arming order.
type stepTimers []*stepTimer

func (h stepTimers) Len() int { return len(h) }
func (h stepTimers) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h stepTimers) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *stepTimers) Push(x any) {
	t := x.(*stepTimer)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *stepTimers) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idx = -1
	return t
}

// stepTicker is a ticker that never ticks.
type stepTicker struct{}

func (stepTicker) C() <-chan time.Time { return nil }
func (stepTicker) Stop()               {}
func (stepTicker) Reset(time.Duration) {}
