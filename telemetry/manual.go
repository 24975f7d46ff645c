package telemetry

import (
	"sort"
	"sync"
	"time"
)

// Manual is a Clock for tests: its time moves only through Advance and Set,
// which fire every timer, ticker and AfterFunc that falls due, in order of
// their due times. Channel sends never block (each channel holds one value,
// a late reader drops ticks as with package time), and Stop and Reset
// discard a value not yet received, as package time's do since Go 1.23;
// AfterFunc functions run in their own goroutines, as with package time.
// It is safe for concurrent use.
type Manual struct {
	// moving serializes Advance and Set, so that an Advance reads the time
	// it adds to and sets the sum with no other move in between.
	moving  sync.Mutex
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	waiters []*manualWaiter
	changed chan struct{} // closed and replaced when a waiter is added
}

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual {
	return &Manual{now: start, changed: make(chan struct{})}
}

// manualWaiter is one armed timer, ticker or AfterFunc.
type manualWaiter struct {
	m      *Manual
	due    time.Time
	period time.Duration // > 0 for tickers
	seq    uint64        // arming order, to keep equal due times stable
	c      chan time.Time
	f      func()
	armed  bool
}

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// NewTimer returns a timer due d after the clock's time.
func (m *Manual) NewTimer(d time.Duration) Timer {
	w := &manualWaiter{m: m, c: make(chan time.Time, 1)}
	m.arm(w, d)
	return manualTimer{w}
}

// NewTicker returns a ticker with period d.
func (m *Manual) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("telemetry: non-positive interval for NewTicker")
	}
	w := &manualWaiter{m: m, c: make(chan time.Time, 1), period: d}
	m.arm(w, d)
	return manualTicker{w}
}

// AfterFunc arranges for f to run in its own goroutine once the clock has
// moved d forward.
func (m *Manual) AfterFunc(d time.Duration, f func()) Timer {
	w := &manualWaiter{m: m, f: f}
	m.arm(w, d)
	return manualTimer{w}
}

// Advance moves the clock forward by d, firing what falls due; advances
// from several goroutines add up.
func (m *Manual) Advance(d time.Duration) {
	m.moving.Lock()
	defer m.moving.Unlock()
	m.set(m.Now().Add(d))
}

// Set moves the clock to t (never backwards), firing what falls due on the
// way, each at its own due time.
func (m *Manual) Set(t time.Time) {
	m.moving.Lock()
	defer m.moving.Unlock()
	m.set(t)
}

// set is Set; m.moving held.
func (m *Manual) set(t time.Time) {
	for {
		m.mu.Lock()
		w := m.nextDue(t)
		if w == nil {
			if t.After(m.now) {
				m.now = t
			}
			m.mu.Unlock()
			return
		}
		if w.due.After(m.now) {
			m.now = w.due
		}
		at := m.now
		if w.period > 0 {
			w.due = w.due.Add(w.period)
			m.seq++
			w.seq = m.seq
		} else {
			w.armed = false
			m.remove(w)
		}
		if w.c != nil {
			// Under mu, so that a Stop or Reset (which drain the channel
			// under mu) either precedes the send or discards it.
			select {
			case w.c <- at:
			default:
			}
		}
		f := w.f
		m.mu.Unlock()
		if f != nil {
			go f()
		}
	}
}

// Waiters returns the number of armed timers, tickers and AfterFuncs: a
// test waits for a component to arm its timer before advancing past it.
func (m *Manual) Waiters() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.waiters)
}

// Armed reports whether a timer, ticker or AfterFunc is armed to fall due
// exactly at t: a test checks that a component re-armed the timer it
// expects for the moment it expects, which a count of Waiters cannot tell
// apart from another timer firing or being stopped meanwhile.
func (m *Manual) Armed(t time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.waiters {
		if w.due.Equal(t) {
			return true
		}
	}
	return false
}

// WaitForWaiters blocks until at least n timers are armed and returns the
// count; use it before Advance so the advance cannot race the arming.
func (m *Manual) WaitForWaiters(n int) int {
	for {
		m.mu.Lock()
		got, ch := len(m.waiters), m.changed
		m.mu.Unlock()
		if got >= n {
			return got
		}
		<-ch
	}
}

// nextDue returns the earliest waiter due at or before t; m.mu held.
func (m *Manual) nextDue(t time.Time) *manualWaiter {
	if len(m.waiters) == 0 {
		return nil
	}
	sort.Slice(m.waiters, func(i, j int) bool {
		a, b := m.waiters[i], m.waiters[j]
		if !a.due.Equal(b.due) {
			return a.due.Before(b.due)
		}
		return a.seq < b.seq
	})
	if w := m.waiters[0]; !w.due.After(t) {
		return w
	}
	return nil
}

// arm (re)schedules w d from now and reports whether it was armed before.
// A firing not yet received is discarded, as time.Timer.Reset does.
func (m *Manual) arm(w *manualWaiter, d time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	w.drain()
	was := w.armed
	if !was {
		m.waiters = append(m.waiters, w)
		w.armed = true
		close(m.changed)
		m.changed = make(chan struct{})
	}
	m.seq++
	w.due, w.seq = m.now.Add(d), m.seq
	return was
}

// disarm removes w and reports whether it was armed. A firing not yet
// received is discarded, as time.Timer.Stop does.
func (m *Manual) disarm(w *manualWaiter) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	w.drain()
	was := w.armed
	if was {
		w.armed = false
		m.remove(w)
	}
	return was
}

// drain discards a value sent on w's channel and not received, so that,
// as with package time's timers and tickers since Go 1.23, no value sent
// before a Stop or Reset is received after it; m.mu held.
func (w *manualWaiter) drain() {
	if w.c == nil {
		return
	}
	select {
	case <-w.c:
	default:
	}
}

// remove drops w from the waiters; m.mu held.
func (m *Manual) remove(w *manualWaiter) {
	for i, x := range m.waiters {
		if x == w {
			m.waiters = append(m.waiters[:i], m.waiters[i+1:]...)
			return
		}
	}
}

type manualTimer struct{ w *manualWaiter }

func (t manualTimer) C() <-chan time.Time { return t.w.c }

func (t manualTimer) Stop() bool { return t.w.m.disarm(t.w) }

func (t manualTimer) Reset(d time.Duration) bool { return t.w.m.arm(t.w, d) }

type manualTicker struct{ w *manualWaiter }

func (t manualTicker) C() <-chan time.Time { return t.w.c }

func (t manualTicker) Stop() { t.w.m.disarm(t.w) }

func (t manualTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("telemetry: non-positive interval for Ticker.Reset")
	}
	t.w.m.mu.Lock()
	t.w.period = d
	t.w.m.mu.Unlock()
	t.w.m.arm(t.w, d)
}
